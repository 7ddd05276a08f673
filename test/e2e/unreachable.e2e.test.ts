// `oncemq` pointed at a broker or database that cannot be reached prints one line naming it, its URL
// without the password and (Kafka, RocketMQ) what to run, and exits 1: no stack, no driver's retries.
// Each points at a closed port of 127.0.0.1, by flag or by the service's environment variable.
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';

beforeAll(buildCli, 180_000);
afterAll(removeCli);

/** A port of 127.0.0.1 nothing listens on: one the system just gave out and took back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

const port = await closedPort();
const at = `127.0.0.1:${port}`;
const refused = `the server is not reachable (connect ECONNREFUSED ${at})`;

interface Case {
  readonly args: readonly string[];
  readonly env?: Record<string, string>;
  /** The whole of stderr: one line. */
  readonly line: string;
}

const TRANSPORTS: Readonly<Record<string, Case>> = {
  rabbitmq: {
    args: ['--broker-url', `amqp://guest:s3cret@${at}`],
    line: `TransportUnavailableError: cannot connect to RabbitMQ at amqp://guest:***@${at}: ${refused}`,
  },
  nats: {
    args: [],
    env: { ONCEMQ_NATS_URL: `nats://${at}` },
    line: `TransportUnavailableError: cannot connect to NATS at nats://${at}: ${refused}`,
  },
  'redis-streams': {
    args: ['--broker-url', `redis://:s3cret@${at}`],
    line: `TransportUnavailableError: cannot connect to Redis at redis://:***@${at}: ${refused}`,
  },
  kafka: {
    args: [],
    env: { ONCEMQ_KAFKA_URL: `kafka://${at}` },
    line: `TransportUnavailableError: cannot connect to Kafka at kafka://${at}: ${refused}; start one there (npm run brokers -- start kafka, in an oncemq checkout)`,
  },
  rocketmq: {
    args: ['--broker-url', `rocketmq://${at}?namesrv=${at}`],
    line: `TransportUnavailableError: cannot connect to RocketMQ at rocketmq://${at}?namesrv=${at}: ${refused}; start one there (npm run brokers -- start rocketmq, in an oncemq checkout)`,
  },
};

describe('oncemq demo --transport T with its broker unreachable', () => {
  for (const [transport, { args, env, line }] of Object.entries(TRANSPORTS)) {
    it(`${transport}: one line naming the broker and its URL, exit 1`, async () => {
      const run = await oncemq(
        ['demo', '--transport', transport, '--events', '10', ...args],
        env ?? {},
        60_000,
      );
      expect(run.stderr).toBe(`oncemq demo: ${line}\n`);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
    }, 90_000);
  }
});

describe('oncemq with its database unreachable', () => {
  const cases: readonly (Case & { readonly name: string })[] = [
    {
      name: 'demo --store postgres',
      args: [
        'demo',
        '--store',
        'postgres',
        '--url',
        `postgres://postgres:s3cret@${at}/test`,
        '--events',
        '10',
      ],
      line: `oncemq demo: LedgerUnavailableError: cannot connect to PostgreSQL at postgres://postgres:***@${at}/test: ${refused}`,
    },
    {
      name: 'demo --store mysql',
      args: ['demo', '--store', 'mysql', '--events', '10'],
      env: { ONCEMQ_MYSQL_URL: `mysql://root:s3cret@${at}/test` },
      line: `oncemq demo: LedgerUnavailableError: cannot connect to MySQL at mysql://root:***@${at}/test: ${refused}`,
    },
    {
      name: 'demo --store tiered (Redis)',
      args: ['demo', '--store', 'tiered', '--url', `redis://:s3cret@${at}`, '--events', '10'],
      line: `oncemq demo: LedgerUnavailableError: cannot connect to Redis at redis://:***@${at}: ${refused}`,
    },
    {
      name: 'ledger stuck --store postgres',
      args: ['ledger', 'stuck', '--store', 'postgres', '--url', `postgres://postgres@${at}/test`],
      line: `oncemq ledger: LedgerUnavailableError: cannot connect to PostgreSQL at postgres://postgres@${at}/test: ${refused}`,
    },
    {
      name: 'migrate --store mysql',
      args: ['migrate', '--store', 'mysql', '--url', `mysql://root@${at}/test`],
      line: `oncemq migrate: LedgerUnavailableError: cannot connect to MySQL at mysql://${at}/test: ${refused}`,
    },
  ];
  for (const { name, args, env, line } of cases) {
    it(`${name}: one line naming the database and its URL, exit 1`, async () => {
      const run = await oncemq(args, env ?? {}, 60_000);
      expect(run.stderr).toBe(`${line}\n`);
      expect(run.code).toBe(1);
    }, 90_000);
  }
});
