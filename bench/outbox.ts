/**
 * Outbox relay throughput: rows published with broker confirms per second, PostgreSQL → RabbitMQ and
 * PostgreSQL → NATS JetStream, with one and two relays (`oncemq:outbox:<transport>`,
 * `oncemq:outbox:<transport>:2-relays`), beside the raw client publishing the same messages with
 * confirms, 100 in flight as a relay round has (`raw:outbox:<transport>`, the messages in memory), and
 * a relay written by hand with the raw client over the same outbox table (`raw:relay:<transport>`: per
 * batch of 100, `BEGIN`, `SELECT … FOR UPDATE SKIP LOCKED`, publish with confirms, `UPDATE … SET sent_at`,
 * `COMMIT`). The relays read, lease and mark every row in PostgreSQL. The contenders take turns,
 * `repetitions` times, so a noisy neighbour slows them alike; each row also reports the CPU this process
 * used per message while it drained (`cpuMicrosPerMessage`, in `--json`), which the neighbours do not
 * stretch.
 *
 *   npm run bench -- outbox [--json] [--flag rows=4000] [--flag repetitions=3] [--flag transports=rabbitmq,nats]
 *     [--flag only=<row>,<row>]
 *   (ONCEMQ_POSTGRES_URL, ONCEMQ_RABBITMQ_URL, ONCEMQ_NATS_URL)
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
import { RabbitTransport } from '../src/transport/rabbitmq/rabbitmq-transport.js';
import type { Transport } from '../src/transport/transport.js';
import { summarize, type BenchResult, type Suite } from './harness.js';

const IN_FLIGHT = 100;

/** CPU time (user + system) this process used while a contender drained, summed over its drains. */
const cpuMicros = new Map<string, number>();
let draining: string | undefined;

/** Starts the clock of a drain: answers how to read the elapsed ms, adding its CPU to the contender's. */
function startClock(): () => number {
  const started = performance.now();
  const cpu = process.cpuUsage();
  return () => {
    const used = process.cpuUsage(cpu);
    if (draining !== undefined) {
      cpuMicros.set(draining, (cpuMicros.get(draining) ?? 0) + used.user + used.system);
    }
    return performance.now() - started;
  };
}

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
  const stop = startClock();
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
  const elapsed = stop();
  await Promise.all(running.map((relay) => relay.stop()));
  return elapsed;
}

/**
 * The relay a user writes by hand over the same table (one of them, so rows go out in id order): per
 * batch, one transaction holds the claimed rows locked while they are published with confirms and
 * marks them sent. No lease, no retry bookkeeping, no per-key sequence check: the least a correct
 * relay does. Answers the elapsed time until every row was published and marked.
 */
async function rawRelayAll(
  pool: pg.Pool,
  outbox: Outbox<PgClientLike>,
  rows: readonly Message[],
  publish: (row: Message) => Promise<unknown>,
): Promise<number> {
  await fill(pool, outbox, rows);
  const table = `"${outbox.schema ?? 'public'}".oncemq_outbox`;
  const client = await pool.connect();
  const stop = startClock();
  try {
    for (let sent = 0; sent < rows.length;) {
      await client.query('BEGIN');
      const batch = await client.query<{ id: string; business_key: string; body: Buffer }>(
        `SELECT id, business_key, body FROM ${table} WHERE sent_at IS NULL ORDER BY id LIMIT ${IN_FLIGHT} FOR UPDATE SKIP LOCKED`,
      );
      await Promise.all(batch.rows.map((row) => publish({ key: row.business_key, body: row.body })));
      await client.query(`UPDATE ${table} SET sent_at = $1 WHERE id = ANY($2::bigint[])`, [
        Date.now(),
        batch.rows.map((row) => row.id),
      ]);
      await client.query('COMMIT');
      sent += batch.rows.length;
    }
  } finally {
    client.release();
  }
  return stop();
}

/** Publishes `rows` with confirms, IN_FLIGHT at a time; answers the elapsed time. */
async function rawAll(
  rows: readonly Message[],
  publish: (row: Message) => Promise<unknown>,
): Promise<number> {
  const stop = startClock();
  for (let i = 0; i < rows.length; i += IN_FLIGHT) {
    await Promise.all(rows.slice(i, i + IN_FLIGHT).map(publish));
  }
  return stop();
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
            // What a relay must ask for as the transport does: stored to disk, and returned if unroutable.
            persistent: true,
            mandatory: true,
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
    const repetitions = Number(flags.repetitions ?? 3);
    const targets = { rabbitmq: rabbitTarget, nats: natsTarget };
    const chosen = (flags.transports ?? 'rabbitmq,nats').split(',');
    for (const name of chosen) {
      if (!(name in targets)) throw new Error(`--flag transports: ${name} is not one of rabbitmq, nats`);
    }
    const pool = new pg.Pool({ connectionString: resolveServiceUrl('postgres').url, max: 8 });
    const schema = `oncemq_bench_${randomBytes(4).toString('hex')}`;
    const results: BenchResult[] = [];
    try {
      await pool.query(`CREATE SCHEMA "${schema}"`);
      const outbox = createOutbox({ dialect: postgresDialect, schema });
      await outbox.migrate(pool);
      for (const open of chosen.map((name) => targets[name as keyof typeof targets])) {
        const target = await open(`obb-${randomBytes(3).toString('hex')}`);
        try {
          const raw = `raw:outbox:${target.name}`;
          const rawRelay = `raw:relay:${target.name}`;
          let run = 0;
          const next = (): Message[] => messages(count, `r${run++}-${randomBytes(3).toString('hex')}`);
          // Unmeasured warm-up of every path, then the contenders in turn, `repetitions` times.
          await rawAll(next().slice(0, 500), target.raw);
          await rawRelayAll(pool, outbox, next().slice(0, 500), target.raw);
          await relayAll(pool, outbox, target.transport, next().slice(0, 500), 1);
          const contenders: {
            name: string;
            note: string;
            baseline?: string;
            drain: () => Promise<number>;
          }[] = [
            {
              name: raw,
              note: 'the raw client, messages in memory',
              drain: () => rawAll(next(), target.raw),
            },
            {
              name: rawRelay,
              note: 'a relay written by hand with the raw client: lock, publish, mark, commit per batch',
              drain: () => rawRelayAll(pool, outbox, next(), target.raw),
            },
            {
              // The transport alone, same messages and in-flight count: what the relay adds is the rest.
              name: `transport:outbox:${target.name}`,
              note: 'transport.publish alone, no database',
              baseline: raw,
              drain: () =>
                rawAll(next(), (row) =>
                  target.transport.publish({ topic: 'events', key: row.key, body: row.body }),
                ),
            },
            ...[1, 2].map((relays) => ({
              name: `oncemq:outbox:${target.name}${relays === 2 ? ':2-relays' : ''}`,
              note: `${relays} relay${relays === 2 ? 's' : ''}, batches of ${IN_FLIGHT}`,
              baseline: rawRelay,
              drain: () => relayAll(pool, outbox, target.transport, next(), relays),
            })),
          ];
          // `--flag only=<row>,<row>` keeps those rows (a profile of one contender); ratios need their baseline.
          const only = flags.only?.split(',');
          if (only !== undefined) {
            for (let i = contenders.length - 1; i >= 0; i--) {
              if (!only.includes((contenders[i] as (typeof contenders)[number]).name))
                contenders.splice(i, 1);
            }
          }
          const elapsed = contenders.map((): number[] => []);
          for (let repetition = 0; repetition < repetitions; repetition++) {
            const order = [...contenders.keys()];
            if (repetition % 2 === 1) order.reverse();
            for (const i of order) {
              const contender = contenders[i] as (typeof contenders)[number];
              draining = contender.name;
              elapsed[i]?.push(await contender.drain());
              draining = undefined;
            }
          }
          const rate = (ms: number): number => count / ms;
          contenders.forEach(({ name, note, baseline }, i) => {
            const times = elapsed[i] ?? [];
            const base =
              baseline === undefined ? undefined : elapsed[contenders.findIndex((c) => c.name === baseline)];
            const ratios =
              base === undefined ? undefined : times.map((ms, r) => rate(ms) / rate(base[r] ?? ms));
            results.push({
              ...summarize(
                name,
                IN_FLIGHT,
                count * times.length,
                times.reduce((a, b) => a + b, 0),
                [],
              ),
              note,
              ...(baseline === undefined ? {} : { baseline }),
              ...(ratios === undefined ? {} : { ratios: ratios.map((x) => Number(x.toFixed(2))) }),
              repetitions: times.length,
              // This process's CPU per row while it drained (the relay's or the raw code's, its drivers'):
              // unlike the rate, a busy neighbour on a shared machine does not stretch it.
              cpuMicrosPerMessage: Number(((cpuMicros.get(name) ?? 0) / (count * times.length)).toFixed(1)),
            });
          });
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
