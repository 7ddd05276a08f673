// A broker or database that cannot be reached is one typed error naming it, its URL without the
// password and (for Kafka and RocketMQ) what to run: every transport and the server ledgers, each
// pointed at a closed port of 127.0.0.1 (nothing to start, and never a service other tests use).
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { LedgerUnavailableError, SILENT_LOGGER, TransportUnavailableError, type Transport } from 'oncemq';
import { KafkaTransport } from 'oncemq/kafka';
import { MysqlLedger } from 'oncemq/mysql';
import { NatsTransport } from 'oncemq/nats';
import { PostgresLedger } from 'oncemq/postgres';
import { RabbitTransport } from 'oncemq/rabbitmq';
import { RedisLedger } from 'oncemq/redis';
import { RedisStreamsTransport } from 'oncemq/redis-streams';
import { RocketMQTransport } from 'oncemq/rocketmq';

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
const refused = `connect ECONNREFUSED 127.0.0.1:${port}`;

/** The one line a server that cannot be reached is told with. */
function unreachable(server: string, url: string, hint = ''): RegExp {
  const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(
    `^cannot connect to ${server} at ${escaped(url)}: the server is not reachable \\(${escaped(refused)}\\)${escaped(hint)}$`,
  );
}

const KAFKA_HINT = '; start one there (npm run brokers -- start kafka, in an oncemq checkout)';
const ROCKETMQ_HINT = '; start one there (npm run brokers -- start rocketmq, in an oncemq checkout)';

const message = { topic: 'orders', key: 'order-1', body: { orderId: 'order-1' } };
const processor = () => Promise.reject(new Error('never called'));

/** publish and subscribe (and init, where there is one) each fail with `expected`, a TransportUnavailableError. */
async function expectEveryEntranceUnreachable(open: () => Transport, expected: RegExp): Promise<void> {
  for (const call of ['init', 'publish', 'subscribe'] as const) {
    const transport = open();
    const attempt =
      call === 'init'
        ? (transport as { init?: () => Promise<void> }).init?.()
        : call === 'publish'
          ? transport.publish(message)
          : transport.subscribe('points', ['orders'], processor);
    if (attempt === undefined) continue;
    const error: unknown = await attempt.then(
      () => undefined,
      (failure: unknown) => failure,
    );
    await transport.close();
    expect(error, call).toBeInstanceOf(TransportUnavailableError);
    expect((error as Error).message, call).toMatch(expected);
  }
}

describe('a transport whose broker cannot be reached', () => {
  it('RabbitMQ: names the URL without its password', async () => {
    const url = `amqp://guest:s3cret@127.0.0.1:${port}`;
    await expectEveryEntranceUnreachable(
      () => new RabbitTransport({ url, reconnectDelay: '10ms', logger: SILENT_LOGGER }),
      unreachable('RabbitMQ', `amqp://guest:***@127.0.0.1:${port}`),
    );
  });

  it('NATS', async () => {
    const servers = `nats://127.0.0.1:${port}`;
    await expectEveryEntranceUnreachable(
      () => new NatsTransport({ servers, logger: SILENT_LOGGER }),
      unreachable('NATS', servers),
    );
  });

  it('Redis Streams: names the URL without its password', async () => {
    const failure: unknown = await RedisStreamsTransport.connect(`redis://:s3cret@127.0.0.1:${port}`).catch(
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(TransportUnavailableError);
    expect((failure as Error).message).toMatch(unreachable('Redis', `redis://:***@127.0.0.1:${port}`));
  });

  it('Kafka: says what to run, after the client’s retries (about 2.5 s), not a stack of them', async () => {
    const url = `kafka://127.0.0.1:${port}`;
    await expectEveryEntranceUnreachable(
      () => new KafkaTransport({ url, logger: SILENT_LOGGER }),
      unreachable('Kafka', url, KAFKA_HINT),
    );
  }, 60_000);

  it('RocketMQ: names the proxy and the name server, and what to run', async () => {
    const url = `rocketmq://127.0.0.1:${port}?namesrv=127.0.0.1:${port}`;
    await expectEveryEntranceUnreachable(
      () => new RocketMQTransport({ url, logger: SILENT_LOGGER }),
      unreachable('RocketMQ', url, ROCKETMQ_HINT),
    );
  });
});

/** init() fails with `expected`, a LedgerUnavailableError. */
async function expectInitUnreachable(ledger: { init(): Promise<void> }, expected: RegExp): Promise<void> {
  const error: unknown = await ledger.init().then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(LedgerUnavailableError);
  expect((error as Error).message).toMatch(expected);
}

describe('a ledger whose database cannot be reached', () => {
  it('PostgreSQL, by URL: names it without its password', async () => {
    const ledger = new PostgresLedger({
      connectionString: `postgres://postgres:s3cret@127.0.0.1:${port}/test`,
      logger: SILENT_LOGGER,
    });
    await expectInitUnreachable(
      ledger,
      unreachable('PostgreSQL', `postgres://postgres:***@127.0.0.1:${port}/test`),
    );
    await ledger.close();
  });

  it('MySQL, on the application’s pool: names its host, port and database', async () => {
    const pool = mysql.createPool({ uri: `mysql://root:s3cret@127.0.0.1:${port}/test` });
    const ledger = new MysqlLedger({ pool, logger: SILENT_LOGGER });
    await expectInitUnreachable(ledger, unreachable('MySQL', `mysql://127.0.0.1:${port}/test`));
    await ledger.close();
    await pool.end();
  });

  it('Redis, on a node-redis client that could not connect: says the client is not connected', async () => {
    const client = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: false } });
    client.on('error', () => undefined);
    await client.connect().catch(() => undefined);
    const ledger = new RedisLedger({ client, logger: SILENT_LOGGER });
    const error: unknown = await ledger.init().catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^cannot connect to Redis at redis://127\\.0\\.0\\.1:${port}: the server is not reachable \\(the client is not connected: .*The client is closed\\)$`,
      ),
    );
  });

  it('Redis, on an ioredis client still trying to connect: gives up after the ledger’s timeout', async () => {
    const client = new Redis({ host: '127.0.0.1', port, lazyConnect: false });
    client.on('error', () => undefined);
    const ledger = new RedisLedger({ client, timeout: '300ms', logger: SILENT_LOGGER });
    const error: unknown = await ledger.init().catch((failure: unknown) => failure);
    client.disconnect();
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^cannot connect to Redis at redis://127\\.0\\.0\\.1:${port}: the server is not reachable \\(the client is not connected: .*within 300ms\\)$`,
      ),
    );
  });
});
