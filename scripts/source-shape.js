#!/usr/bin/env node
// The shape of src/ at a revision, read from git (the working tree is not read):
//   node scripts/source-shape.js [REV] [--json]        (REV: default HEAD)
// Lines per folder of src/transport (each broker, and the shared kit), lines of ordering code per
// broker (files named for ordering: ordered, partition count, lease or drain, partitions, lane,
// count-watch; the folder src/transport/ordered whole), the five
// largest files of src/, the files of src/ and test/ over 400 lines, and the names each entry point
// exports (values and types), as recorded in test/e2e/public-surface.json at that revision.
import { execFileSync } from 'node:child_process';
import console from 'node:console';
import process from 'node:process';

const MAX_LINES = 400;
const ORDERING_FILE =
  /ordered|partition-count|partition-lease|partition-drain|partitions\.ts|lane|count-watch/;
const ENTRIES = ['.', './local', './nats', './rabbitmq', './redis-streams', './kafka', './rocketmq', './sqs'];

const args = process.argv.slice(2);
const json = args.includes('--json');
const rev = args.find((arg) => !arg.startsWith('--')) ?? 'HEAD';

const git = (...command) => execFileSync('git', command, { encoding: 'utf8', maxBuffer: 1 << 28 });

/** Every .ts file under `folders` at `rev`, with its line count. */
function files(...folders) {
  return git('ls-tree', '-r', '--name-only', rev, '--', ...folders)
    .split('\n')
    .filter((path) => path.endsWith('.ts'))
    .map((path) => {
      const text = git('show', `${rev}:${path}`);
      return { path, lines: text.length === 0 ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0) };
    });
}

const sum = (list) => list.reduce((total, file) => total + file.lines, 0);
const src = files('src');
const transport = src.filter((file) => file.path.startsWith('src/transport/'));
const folderOf = (path) => {
  const parts = path.split('/');
  return parts.length > 3 ? parts[2] : '(kit, top level)';
};

const perFolder = {};
const ordering = {};
for (const file of transport) {
  const folder = folderOf(file.path);
  perFolder[folder] = (perFolder[folder] ?? 0) + file.lines;
  const name = file.path.split('/').pop();
  if (folder === 'ordered' || ORDERING_FILE.test(name))
    ordering[folder] = (ordering[folder] ?? 0) + file.lines;
}

let surface = {};
try {
  surface = JSON.parse(git('show', `${rev}:test/e2e/public-surface.json`));
} catch {
  surface = {};
}
const exportsOf = Object.fromEntries(
  ENTRIES.filter((entry) => surface[entry] !== undefined).map((entry) => [
    entry,
    { values: surface[entry].values.length, types: surface[entry].types.length },
  ]),
);

const shape = {
  rev: git('rev-parse', '--short', rev).trim(),
  srcLines: sum(src),
  transportLines: sum(transport),
  linesPerTransportFolder: perFolder,
  orderingLinesPerFolder: ordering,
  largestFiles: [...src].sort((a, b) => b.lines - a.lines).slice(0, 5),
  filesOver400: [...src, ...files('test')].filter((file) => file.lines > MAX_LINES),
  exports: exportsOf,
};

if (json) {
  console.log(JSON.stringify(shape, null, 2));
} else {
  console.log(`src/ at ${shape.rev}: ${shape.srcLines} lines, src/transport ${shape.transportLines}`);
  console.log('lines per src/transport folder:');
  for (const [folder, lines] of Object.entries(perFolder).sort())
    console.log(`  ${folder.padEnd(18)} ${lines}`);
  console.log(`lines of ordering code (files matching ${ORDERING_FILE}):`);
  for (const [folder, lines] of Object.entries(ordering).sort())
    console.log(`  ${folder.padEnd(18)} ${lines}`);
  console.log('five largest files of src/:');
  for (const file of shape.largestFiles) console.log(`  ${String(file.lines).padStart(4)} ${file.path}`);
  console.log(`files over ${MAX_LINES} lines (src/, test/):`);
  for (const file of shape.filesOver400) console.log(`  ${String(file.lines).padStart(4)} ${file.path}`);
  if (shape.filesOver400.length === 0) console.log('  none');
  console.log('exports per entry point (values / types), from test/e2e/public-surface.json:');
  for (const [entry, count] of Object.entries(exportsOf))
    console.log(`  ${entry.padEnd(16)} ${count.values} / ${count.types}`);
}
