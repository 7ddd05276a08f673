/**
 * Outbox relay throughput: rows published with broker confirms per second, PostgreSQL → RabbitMQ and
 * PostgreSQL → NATS JetStream, with one and two relays (`oncemq:outbox:<transport>`,
 * `oncemq:outbox:<transport>:2-relays`), beside the raw client publishing the same messages with
 * confirms, 100 in flight as a relay round has (`raw:outbox:<transport>`). The relays read, lease
 * and mark every row in PostgreSQL; the raw client has the messages in memory.
 *
 *   npm run bench -- outbox [--json] [--flag rows=4000]   (ONCEMQ_POSTGRES_URL, ONCEMQ_RABBITMQ_URL, ONCEMQ_NATS_URL)
 */
import { randomBytes } from 'node:crypto';
import amqplib from 'amqplib';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { resolveServiceUrl } from '../src/cli/connection.js';
import type { PgClientLike } from '../src/ledger/postgres/postgres-client.js';
import { postgresDialect } from '../src/ledger/postgres/postgres-dialect.js';
import { createOutbox, type Outbox } from '../src/outbox/outbox.js';
import { createRelay } from '../src/outbox/relay.js';
import { NatsTransport } from '../src/transport/nats/nats-transport.js';
import { RabbitTransport } from '../src/transport/rabbitmq/rabbit-transport.js';
import type { Transport } from '../src/transport/transport.js';
import { summarize, type BenchResult, type Suite } from './harness.js';

const IN_FLIGHT = 100;

interface Message {
  readonly key: string;
  readonly body: Buffer;
}

function messages(count: number, run: string): Message[] {
  return Array.from({ length: count }, (_, i) => ({
    key: `${run}-${i}`,
    body: Buffer.from(JSON.stringify({ orderId: `${run}-${i}`, amount: 100, currency: 'EUR' })),
  }));
}

/** Writes the rows into the outbox, 500 to a transaction (not measured). */
async function fill(pool: pg.Pool, outbox: Outbox<PgClientLike>, rows: readonly Message[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 500) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      for (const row of rows.slice(i, i + 500)) {
        await outbox.add(client, { topic: 'events', key: row.key, body: row.body });
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  }
}

/** Relays `rows` with `relays` relays; answers the elapsed time until every row was published and marked. */
async function relayAll(
  pool: pg.Pool,
  outbox: Outbox<PgClientLike>,
  transport: Transport,
  rows: readonly Message[],
  relays: number,
): Promise<number> {
  await fill(pool, outbox, rows);
  const started = performance.now();
  const running = Array.from({ length: relays }, () =>
    createRelay({
      outbox,
      transport,
      database: pool,
      batchSize: IN_FLIGHT,
      pollInterval: '2ms',
      listen: false,
    }),
  );
  await Promise.all(running.map((relay) => relay.start()));
  while (running.reduce((sum, relay) => sum + relay.metrics().published, 0) < rows.length) {
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const elapsed = performance.now() - started;
  await Promise.all(running.map((relay) => relay.stop()));
  return elapsed;
}

/** Publishes `rows` with confirms, IN_FLIGHT at a time; answers the elapsed time. */
async function rawAll(
  rows: readonly Message[],
  publish: (row: Message) => Promise<unknown>,
): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < rows.length; i += IN_FLIGHT) {
    await Promise.all(rows.slice(i, i + IN_FLIGHT).map(publish));
  }
  return performance.now() - started;
}

interface Target {
  readonly name: string;
  readonly transport: Transport;
  readonly raw: (row: Message) => Promise<unknown>;
  close(): Promise<void>;
}

async function rabbitTarget(prefix: string): Promise<Target> {
  const { url } = resolveServiceUrl('rabbitmq');
  const transport = new RabbitTransport({ url, prefix, exchange: prefix });
  await transport.publish({ topic: 'events', key: 'warm-up', body: '{}' });
  const connection = await amqplib.connect(url);
  const channel = await connection.createConfirmChannel();
  return {
    name: 'rabbitmq',
    transport,
    raw: (row) =>
      new Promise<void>((resolve, reject) => {
        channel.publish(
          prefix,
          'events',
          row.body,
          {
            messageId: row.key,
            headers: { 'oncemq-key': row.key },
            timestamp: Math.floor(Date.now() / 1000),
          },
          (error: unknown) =>
            error ? reject(error instanceof Error ? error : new Error('publish not confirmed')) : resolve(),
        );
      }),
    close: async () => {
      await channel.close();
      const admin = await connection.createChannel();
      for (const queue of transport.declared.queues) await admin.deleteQueue(queue);
      for (const exchange of transport.declared.exchanges) await admin.deleteExchange(exchange);
      await connection.close();
      await transport.close();
    },
  };
}

async function natsTarget(prefix: string): Promise<Target> {
  const { url } = resolveServiceUrl('nats');
  const names = {
    streamPrefix: prefix.toUpperCase().replace(/-/g, '_'),
    subjectPrefix: prefix.replace(/-/g, '_'),
  };
  const transport = new NatsTransport({ servers: url, ...names });
  await transport.publish({ topic: 'events', key: 'warm-up', body: '{}' });
  const connection = await connect({ servers: url });
  const js = jetstream(connection);
  return {
    name: 'nats',
    transport,
    raw: (row) => js.publish(`${names.subjectPrefix}.events`, row.body, { msgID: row.key }),
    close: async () => {
      await transport.close();
      const { jetstreamManager } = await import('@nats-io/jetstream');
      const jsm = await jetstreamManager(connection);
      for await (const stream of jsm.streams.names()) {
        if (stream.startsWith(names.streamPrefix)) await jsm.streams.delete(stream);
      }
      await connection.close();
    },
  };
}

export const suite: Suite = {
  name: 'outbox',
  description:
    'relay throughput PostgreSQL → RabbitMQ / NATS (1 and 2 relays) vs the raw client with confirms',
  async run({ flags }) {
    const count = Number(flags.rows ?? 4000);
    const pool = new pg.Pool({ connectionString: resolveServiceUrl('postgres').url, max: 8 });
    const schema = `oncemq_bench_${randomBytes(4).toString('hex')}`;
    const results: BenchResult[] = [];
    try {
      await pool.query(`CREATE SCHEMA "${schema}"`);
      const outbox = createOutbox({ dialect: postgresDialect, schema });
      await outbox.migrate(pool);
      for (const open of [rabbitTarget, natsTarget]) {
        const target = await open(`obb-${randomBytes(3).toString('hex')}`);
        try {
          const raw = `raw:outbox:${target.name}`;
          let run = 0;
          const next = (): Message[] => messages(count, `r${run++}-${randomBytes(3).toString('hex')}`);
          // Unmeasured warm-up of both paths, then raw, one relay, two relays.
          await rawAll(next().slice(0, 500), target.raw);
          await relayAll(pool, outbox, target.transport, next().slice(0, 500), 1);
          const rawMs = await rawAll(next(), target.raw);
          results.push(summarize(raw, IN_FLIGHT, count, rawMs, []));
          // The transport alone, same messages and in-flight count: what the relay adds is the rest.
          const transportMs = await rawAll(next(), (row) =>
            target.transport.publish({ topic: 'events', key: row.key, body: row.body }),
          );
          results.push({
            ...summarize(`transport:outbox:${target.name}`, IN_FLIGHT, count, transportMs, []),
            baseline: raw,
            note: 'transport.publish alone, no database',
          });
          for (const relays of [1, 2]) {
            const ms = await relayAll(pool, outbox, target.transport, next(), relays);
            const name = `oncemq:outbox:${target.name}${relays === 2 ? ':2-relays' : ''}`;
            results.push({
              ...summarize(name, IN_FLIGHT, count, ms, []),
              baseline: raw,
              note: `${relays} relay${relays === 2 ? 's' : ''}, batches of ${IN_FLIGHT}`,
            });
          }
        } finally {
          await target.close();
        }
      }
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    }
    return results;
  },
};
