import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Knex } from 'knex';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, createOutbox, createPipeline, createRelay, type PipelineConfig } from 'oncemq';
import { knexLedger, type BridgedLedger } from 'oncemq/knex';
import { addPoints } from '../support/knex-pipeline.js';
import {
  payment,
  paymentEnvelope,
  paymentEvents,
  scratchDir,
  type PaymentSucceeded,
} from '../support/points.js';
import { knexOnSqlite } from '../support/sqlite-builders.js';

describe('a pipeline on Knex (SQLite): one connection, held by the claim', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let path: string;
  const instances: Knex[] = [];
  /** A knex instance on the scratch file, destroyed after the test. */
  const open = async (config: Partial<Knex.Config> = {}): Promise<Knex> => {
    const knex = knexOnSqlite(path, config);
    instances.push(knex);
    await knex.raw('SELECT 1');
    return knex;
  };
  let knex: Knex;
  let ledger: BridgedLedger<Knex.Transaction>;
  /** Reads the committed balances through a connection of its own. */
  const balances = (): Record<string, number> => {
    const reader = new Database(path, { readonly: true });
    try {
      const rows = reader.prepare('SELECT user_id, balance FROM points ORDER BY user_id').all() as {
        user_id: string;
        balance: number;
      }[];
      return Object.fromEntries(rows.map((r) => [r.user_id, r.balance]));
    } finally {
      reader.close();
    }
  };

  beforeEach(async () => {
    scratch = scratchDir();
    path = join(scratch.dir, 'app.db');
    // the application's knex: the default pool of one connection, a short wait for it
    knex = await open({ acquireConnectionTimeout: 500 });
    await knex.schema.createTable('points', (t) => {
      t.text('user_id').primary();
      t.integer('balance').notNullable();
    });
    ledger = knexLedger(knex);
    await ledger.init();
  });
  afterEach(async () => {
    await ledger.close();
    await Promise.all(instances.splice(0).map((k) => k.destroy()));
    scratch.remove();
  });

  const config = (handler: PipelineConfig<Knex.Transaction, PaymentSucceeded>['handler']) => ({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler,
  });

  it('runs ctx.tx.transaction() of the handler as a savepoint of the claim’s transaction: it rolls back with the claim', async () => {
    let fail = true;
    const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
      config(async (event, ctx) => {
        await ctx.tx.transaction((inner) => addPoints(inner, 'points', event));
        if (fail) throw new Error('downstream refused');
      }),
    );
    const event = payment(4);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    expect(balances()).toEqual({});
    fail = false;
    expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('makes the application’s knex inside the handler wait for the connection the claim holds: it fails after acquireConnectionTimeout, nothing is written, the delivery is retried', async () => {
    for (const trap of [
      (event: PaymentSucceeded) => addPoints(knex, 'points', event),
      (event: PaymentSucceeded) => knex.transaction((trx) => addPoints(trx, 'points', event)),
    ]) {
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
        config(async (event, ctx) => {
          await addPoints(ctx.tx, 'points', event);
          await trap(event);
        }),
      );
      const outcome = await pipeline.process(paymentEnvelope(payment(1)));
      expect(outcome.kind).toBe('retry');
      expect(String((outcome as { error?: unknown }).error)).toMatch(/Timeout acquiring a connection/);
      expect(balances()).toEqual({});
    }
  });

  it('runs a query of the application’s knex that the handler gave up on once the claim’s transaction has ended, outside it', async () => {
    const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
      config(async (event, ctx) => {
        await addPoints(ctx.tx, 'points', event);
        const late = addPoints(knex, 'points', { ...event, userId: 'late' }); // waits up to 500 ms for the pool
        const waited = await Promise.race([
          late.then(() => 'ran'),
          new Promise((resolve) => setTimeout(() => resolve('still waiting'), 200)),
        ]);
        expect(waited).toBe('still waiting');
        throw new Error('gave up waiting');
      }),
    );
    expect((await pipeline.process(paymentEnvelope(payment(1)))).kind).toBe('retry');
    await knex.raw('SELECT 1'); // queued behind the abandoned write
    expect(balances()).toEqual({ late: 100 });
  });

  it('claims in an in-memory database through Knex’s one connection, and declares no concurrent connections', async () => {
    const memory = await open({ connection: { filename: ':memory:' } });
    await memory.schema.createTable('points', (t) => {
      t.text('user_id').primary();
      t.integer('balance').notNullable();
    });
    const inMemory = knexLedger(memory);
    try {
      expect(inMemory.capabilities.concurrentConnections).toBe(false);
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>({
        ...config((event, ctx) => addPoints(ctx.tx, 'points', event)),
        ledger: inMemory,
      });
      const event = payment(6);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('executed');
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('duplicate');
      expect(await memory('points').select('user_id', 'balance')).toEqual([
        { user_id: event.userId, balance: 100 },
      ]);
    } finally {
      await inMemory.close();
    }
  });

  it('refuses, on a second connection of the pool, the application’s write inside the handler: SQLite’s write lock is the claim’s until it commits', async () => {
    const two = await open({
      pool: {
        min: 0,
        max: 2,
        afterCreate: (db: Database.Database, done: () => void) => {
          db.pragma('journal_mode = WAL');
          db.pragma('busy_timeout = 100');
          done();
        },
      },
    });
    const onTwo = knexLedger(two);
    try {
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>({
        ...config(async (event, ctx) => {
          await addPoints(ctx.tx, 'points', event);
          await addPoints(two, 'points', { ...event, userId: 'elsewhere' });
        }),
        ledger: onTwo,
      });
      const outcome = await pipeline.process(paymentEnvelope(payment(2)));
      expect(outcome.kind).toBe('retry');
      expect(String((outcome as { error?: unknown }).error)).toMatch(/database is locked/);
      expect(balances()).toEqual({});
    } finally {
      await onTwo.close();
    }
  });

  it('lets consumers on two connections to one file process copies at once: each event is applied once, and no claim fails on the write lock', async () => {
    const other = await open();
    const otherLedger = knexLedger(other);
    try {
      const consumer = (l: BridgedLedger<Knex.Transaction>) =>
        createPipeline<Knex.Transaction, PaymentSucceeded>({
          ...config(async (event, ctx) => {
            await addPoints(ctx.tx, 'points', event);
            await new Promise((resolve) => setTimeout(resolve, 1)); // the handler awaits: the lock is held across turns
          }),
          ledger: l,
        });
      const [one, two] = [consumer(ledger), consumer(otherLedger)];
      const events = paymentEvents(10);
      const copies = [...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(
        copies.map((envelope, i) => (i % 2 === 0 ? one : two).process(envelope)),
      );
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(10);
      expect(outcomes.filter((o) => o.kind === 'duplicate')).toHaveLength(10);
      const total = Object.values(balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(10 * 100);
    } finally {
      await otherLedger.close();
    }
  });

  it('makes a leased claim on another connection wait for the write lock of an open claim with the event loop running, not in SQLite: both commit', async () => {
    const other = await open();
    const otherLedger = knexLedger(other);
    await otherLedger.init();
    try {
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>({
        ...config(async (event, ctx) => {
          await addPoints(ctx.tx, 'points', event); // the claim's transaction holds the write lock from here
          entered();
          await new Promise((resolve) => setTimeout(resolve, 300)); // a timer: it fires only if the thread is free
        }),
      });
      const first = pipeline.process(paymentEnvelope(payment(1)));
      await inside;
      const started = Date.now();
      const leased = await otherLedger.claim({
        group: 'mail',
        key: 'evt-1',
        fingerprint: null,
        brokerId: 'b-1',
        topic: 'payments',
        leaseMs: 30_000,
      });
      expect(leased.status).toBe('acquired');
      expect(Date.now() - started).toBeLessThan(4_000); // well inside the 5 s busy timeout of SQLite's own wait
      expect((await first).kind).toBe('executed');
      expect(balances()).toEqual({ 'user-1': 100 });
    } finally {
      await otherLedger.close();
    }
  });

  it('writes outbox messages through ctx.tx in the claim’s transaction and relays them from a connection of its own; refuses an ended transaction', async () => {
    const outbox = createOutbox({ ledger });
    const relayDb = new Database(path, { timeout: 5000 });
    try {
      await outbox.migrate(relayDb);
      let fail = true;
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
        config(async (event, ctx) => {
          await addPoints(ctx.tx, 'points', event);
          await outbox.add(ctx.tx, { topic: 'points-added', key: event.eventId, body: { n: 1 } });
          if (fail) throw new Error('downstream refused');
        }),
      );
      const event = payment(5);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      let ended: Knex.Transaction | undefined;
      await knex.transaction((trx) => {
        ended = trx;
        return Promise.resolve();
      });
      const over = ended as Knex.Transaction;
      await expect(outbox.add(over, { topic: 't', key: 'late', body: {} })).rejects.toThrow(/has ended/);
      expect(() => ledger.join(over)).toThrow(/has ended/);
      const sent: (string | undefined)[] = [];
      const relay = createRelay({
        outbox,
        database: relayDb,
        transport: {
          name: 'memory',
          publish: (message) => {
            sent.push(message.key);
            return Promise.resolve({ brokerId: `m-${sent.length}`, topic: message.topic });
          },
        },
      });
      try {
        expect(await relay.runOnce()).toMatchObject({ published: 1, failed: 0 });
      } finally {
        await relay.stop();
      }
      expect(sent).toEqual([event.eventId]);
    } finally {
      relayDb.close();
    }
  });

  it('refuses the options of a server ledger and a Knex client on node-sqlite3', () => {
    expect(() => knexLedger(knex, { schema: 'x' })).toThrow(/schema: is not an option of a sqlite ledger/);
    expect(() => knexLedger(knex, { database: 'x' })).toThrow(ConfigError);
    const nodeSqlite3 = {
      client: { dialect: 'sqlite3', driverName: 'sqlite3' },
      raw: knex.raw.bind(knex),
      transaction: knex.transaction.bind(knex),
    };
    expect(() => knexLedger(nodeSqlite3 as unknown as Knex)).toThrow(/use client 'better-sqlite3'/);
  });
});
