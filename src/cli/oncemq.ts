#!/usr/bin/env node
import { OncemqError } from '../core/errors.js';
import { parseErrorLine, UsageError, type Command } from './command.js';
import { exampleCommand } from './commands/example.js';
import { chaosCommand } from './commands/chaos.js';
import { chaosMemberCommand } from './commands/chaos-member.js';
import { demoCommand } from './commands/demo.js';
import { dashboardCommand } from './commands/dashboard.js';
import { dlqCommand } from './commands/dlq.js';
import { doctorCommand } from './commands/doctor.js';
import { ledgerCommand } from './commands/ledger.js';
import { migrateCommand } from './commands/migrate.js';

const commands: readonly Command[] = [
  demoCommand,
  chaosCommand,
  chaosMemberCommand,
  exampleCommand,
  dashboardCommand,
  dlqCommand,
  ledgerCommand,
  migrateCommand,
  doctorCommand,
];

function help(): string {
  const shown = commands.filter((command) => command.hidden !== true);
  const width = Math.max(...shown.map((command) => command.name.length));
  return [
    'oncemq — exactly-once effect for message consumers over at-least-once brokers',
    '',
    'Usage: oncemq <command> [options]',
    '',
    'Commands:',
    ...shown.map((command) => `  ${command.name.padEnd(width)}  ${command.summary}`),
    '',
    'Run `oncemq <command> --help` for a command’s options.',
  ].join('\n');
}

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    console.log(help());
    return name === undefined ? 2 : 0;
  }
  const command = commands.find((candidate) => candidate.name === name);
  if (command === undefined) {
    const what = name.startsWith('-') ? 'option' : 'command';
    console.error(`oncemq: unknown ${what} '${name}'\nRun 'oncemq --help' for the commands.`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(command.usage);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (error) {
    const usage = error instanceof UsageError ? error.message : parseErrorLine(error);
    if (usage !== undefined) {
      console.error(`oncemq ${command.name}: ${usage}\nRun 'oncemq ${command.name} --help' for its options.`);
      return 2;
    }
    if (error instanceof OncemqError) {
      console.error(`oncemq ${command.name}: ${error.name}: ${error.message}`);
      return 1;
    }
    throw error;
  }
}

process.exitCode = await main(process.argv.slice(2));
