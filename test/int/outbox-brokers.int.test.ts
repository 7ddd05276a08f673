import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createPipeline,
  createRelay,
  createTransactionalSender,
  RetryPolicy,
  type Relay,
  type Transport,
} from 'oncemq';
import type { TcpProxy } from 'oncemq/testing';
import { waitUntil } from '../support/local-points.js';
import { natsUnderTest, NATS_SERVICE } from '../support/nats.js';
import { OUTBOX_DATABASES, type OutboxDb } from '../support/outbox.js';
import { sleep } from '../support/points.js';
import { findRabbit, rabbitWorld } from '../support/rabbitmq.js';
import { findService, type Service } from '../support/services.js';

/** A real broker reached through a proxy of its own, and how to clean it up. */
interface Target {
  readonly transport: Transport;
  readonly proxy: TcpProxy;
  cleanup(): Promise<void>;
}

const TARGETS: readonly {
  readonly name: string;
  readonly find: () => Promise<Service>;
  readonly open: (url: string) => Promise<Target>;
}[] = [
  {
    name: 'RabbitMQ',
    find: findRabbit,
    open: async (url) => {
      const world = await rabbitWorld(url);
      return { transport: world.transport, proxy: world.proxy, cleanup: () => world.cleanup() };
    },
  },
  {
    name: 'NATS JetStream',
    find: () => findService(NATS_SERVICE),
    open: async (url) => {
      const under = await natsUnderTest(url);
      return {
        transport: under.transport,
        proxy: under.proxy,
        cleanup: async () => {
          await under.transport.close();
          await under.cleanup();
        },
      };
    },
  },
];

const postgres = OUTBOX_DATABASES.find((factory) => factory.name === 'postgres');

describe.each(TARGETS)('the outbox relay from PostgreSQL to $name', (target) => {
  let service: Service;
  let db: OutboxDb<unknown> | undefined;
  let broker: Target | undefined;
  const relays: Relay<unknown>[] = [];

  beforeAll(async () => {
    service = await target.find();
  });

  beforeEach(async () => {
    if (!service.available) return;
    db = await postgres?.open();
    broker = await target.open(service.url);
  });

  afterEach(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.stop()));
    await broker?.cleanup();
    await db?.close();
  });

  const relay = (extra: Record<string, unknown> = {}): Relay<unknown> => {
    const outboxDb = db as OutboxDb<unknown>;
    const created = createRelay({
      outbox: outboxDb.outbox,
      transport: (broker as Target).transport,
      database: outboxDb.relayDatabase(),
      pollInterval: '20ms',
      minBackoff: '50ms',
      maxBackoff: '400ms',
      publishTimeout: '1s',
      ...extra,
    });
    relays.push(created);
    return created;
  };

  /** Subscribes a consumer group applying one effect per key in the ledger's transaction. */
  async function consume(outboxDb: OutboxDb<unknown>, transport: Transport): Promise<void> {
    const pipeline = createPipeline({
      ledger: outboxDb.ledger,
      group: 'effects',
      retry: new RetryPolicy({ delays: ['50ms', '50ms'] }),
      handler: (_message: unknown, hctx) => outboxDb.applyEffect(hctx.tx, hctx.key),
    });
    await transport.subscribe('effects', ['events'], pipeline, { concurrency: 8 });
  }

  async function addMessages(outboxDb: OutboxDb<unknown>, count: number, prefix: string): Promise<void> {
    await outboxDb.inTx(async (tx) => {
      for (let i = 0; i < count; i++) {
        await outboxDb.outbox.add(tx, { topic: 'events', key: `${prefix}-${i}`, body: { i } });
      }
    });
  }

  it('wakes on NOTIFY at the commit and delivers every key once', async (ctx) => {
    if (db === undefined || broker === undefined) return ctx.skip();
    const outboxDb = db;
    await consume(outboxDb, broker.transport);
    // A poll interval of an hour: only the NOTIFY of the commit can wake the relay.
    const r = relay({ pollInterval: '1h' });
    await r.start();
    await sleep(100);
    await addMessages(outboxDb, 30, 'n');
    await waitUntil(async () => (await outboxDb.effects()).size === 30, 'every key applied');
    expect([...(await outboxDb.effects()).values()].every((n) => n === 1)).toBe(true);
    expect(r.metrics().published).toBe(30);
  });

  it('backs off while the broker is down, loses nothing, and catches up when it is back', async (ctx) => {
    if (db === undefined || broker === undefined) return ctx.skip();
    const outboxDb = db;
    const down = broker;
    await consume(outboxDb, down.transport);
    down.proxy.refuse(true);
    down.proxy.dropConnections();
    await addMessages(outboxDb, 40, 'd');
    const r = relay();
    await r.start();
    await waitUntil(() => r.metrics().failed > 0, 'a failed publish');
    const roundsBefore = r.metrics().rounds;
    await sleep(1500);
    // Backing off from 50ms to 400ms, 1.5s holds a handful of rounds, not a busy loop.
    expect(r.metrics().rounds - roundsBefore).toBeLessThan(15);
    expect(await outboxDb.pending()).toBe(40);
    down.proxy.refuse(false);
    await waitUntil(async () => (await outboxDb.pending()) === 0, 'the relay to catch up', 40_000);
    await waitUntil(async () => (await outboxDb.effects()).size === 40, 'every key applied', 40_000);
    expect([...(await outboxDb.effects()).values()].every((n) => n === 1)).toBe(true);
  });

  it('sendInTransaction goes through the outbox: sent when the transaction commits, nothing when it throws', async (ctx) => {
    if (db === undefined || broker === undefined) return ctx.skip();
    const outboxDb = db;
    const sender = createTransactionalSender({
      transport: broker.transport,
      database: outboxDb.relayDatabase(),
      outbox: outboxDb.outbox,
    });
    expect(sender.via).toBe('outbox');
    await consume(outboxDb, broker.transport);
    const sent = await sender.sendInTransaction(
      { topic: 'events', key: 'paid-1', body: { v: 1 } },
      () => 'ok',
    );
    expect(sent).toMatchObject({ via: 'outbox', state: 'COMMIT', value: 'ok' });
    await expect(
      sender.sendInTransaction({ topic: 'events', key: 'paid-2', body: { v: 2 } }, () => {
        throw new Error('insufficient funds');
      }),
    ).rejects.toThrow('insufficient funds');
    expect(await outboxDb.rows()).toBe(1);
    await relay().start();
    await waitUntil(async () => (await outboxDb.effects()).has('paid-1'), 'the committed message applied');
    await sleep(200);
    expect([...(await outboxDb.effects()).keys()]).toEqual(['paid-1']);
  });
});
