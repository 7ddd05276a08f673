/**
 * Redis Streams: the oncemq transport beside node-redis by hand: `XADD` (its reply is the confirm),
 * one consumer group, `XREADGROUP` of as many entries as there are free slots on a connection of its
 * own (a blocking read holds it), `XACK` after each transaction committed.
 */
import { createClient } from 'redis';
import { resolveServiceUrl } from '../../src/cli/connection.js';
import { RedisStreamsTransport } from '../../src/transport/redis-streams/redis-streams-transport.js';
import type { RawMessage } from '../points-db.js';
import { GROUP, TOPIC } from '../points-db.js';
import { inWindows, PUBLISH_WINDOW, type TransportTarget } from '../transport-target.js';

const url = (): string => resolveServiceUrl('redis').url;

async function connected() {
  const client = createClient({ url: url() });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Deletes every key that starts with `prefix`. */
async function deleteKeys(prefix: string): Promise<void> {
  const client = await connected();
  try {
    const keys = await client.sendCommand<string[]>(['KEYS', `${prefix}*`]);
    for (const key of keys) await client.sendCommand(['DEL', key]);
  } finally {
    client.destroy();
  }
}

type Entries = [string, string[]][];

/**
 * An `XREADGROUP` reply: RESP3 `{ stream: [[id, [field, value, …]], …] }`, RESP2
 * `[[stream, [[id, [field, value, …]], …]]]`, or null when nothing came.
 */
function entriesOf(reply: unknown): RawMessage[] {
  const messages: RawMessage[] = [];
  if (reply === null || reply === undefined) return messages;
  const streams: Entries[] = Array.isArray(reply)
    ? (reply as [string, Entries][]).map(([, entries]) => entries)
    : Object.values(reply as Record<string, Entries>);
  for (const entries of streams) {
    for (const [id, fields] of entries) {
      const at = fields.indexOf('body');
      messages.push({ body: fields[at + 1] ?? '', brokerId: id });
    }
  }
  return messages;
}

export const target: TransportTarget = {
  name: 'redis-streams',
  url,
  async open(scope) {
    const transport = await RedisStreamsTransport.connect(url(), { prefix: scope });
    return { transport, cleanup: () => deleteKeys(scope) };
  },
  async raw(scope, options) {
    const client = await connected();
    const stream = `${scope}:${TOPIC}`;
    await client.sendCommand(['XGROUP', 'CREATE', stream, GROUP, '0', 'MKSTREAM']);
    return {
      publish: (bodies) =>
        inWindows(bodies.length, PUBLISH_WINDOW, (i) =>
          client.sendCommand(['XADD', stream, '*', 'body', bodies[i] ?? '']),
        ),
      async consume(work, acked, failed) {
        const reader = client.duplicate();
        reader.on('error', () => undefined);
        await reader.connect();
        let running = true;
        let inFlight = 0;
        let wake: (() => void) | undefined;
        const tasks = new Set<Promise<void>>();
        const start = (batch: readonly RawMessage[]): void => {
          inFlight += batch.length;
          const task = work(batch)
            .then(async () => {
              await client.sendCommand(['XACK', stream, GROUP, ...batch.map((m) => m.brokerId)]);
              acked(batch.length);
            })
            .catch(failed)
            .finally(() => {
              inFlight -= batch.length;
              tasks.delete(task);
              wake?.();
            });
          tasks.add(task);
        };
        const loop = (async () => {
          while (running) {
            const free = options.concurrency - inFlight;
            if (free <= 0) {
              await new Promise<void>((resolve) => (wake = resolve));
              continue;
            }
            const reply = await reader.sendCommand([
              'XREADGROUP',
              'GROUP',
              GROUP,
              'raw',
              'COUNT',
              String(free),
              'BLOCK',
              '100',
              'STREAMS',
              stream,
              '>',
            ]);
            const messages = entriesOf(reply);
            for (let i = 0; i < messages.length; i += options.batchSize)
              start(messages.slice(i, i + options.batchSize));
          }
        })();
        return {
          async stop() {
            running = false;
            wake?.();
            await loop;
            while (tasks.size > 0) await Promise.all([...tasks]);
            reader.destroy();
          },
        };
      },
      async close() {
        client.destroy();
        await deleteKeys(scope);
      },
    };
  },
};
