import { join } from 'node:path';
import Database from 'better-sqlite3';
import knexFactory, { type Knex } from 'knex';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  createOutbox,
  createPipeline,
  createRelay,
  type OutboxDatabase,
  type PipelineConfig,
} from 'oncemq';
import { knexBridge, knexLedger, type BridgedLedger } from 'oncemq/knex';
import { checkRollback, injectCommitFailures, RollbackCheckError } from 'oncemq/testing';
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { findPostgres, scratchSchema } from '../support/postgres.js';
import {
  payment,
  paymentEnvelope,
  paymentEvents,
  scratchDir,
  type PaymentSucceeded,
} from '../support/points.js';
import { knexOnSqlite } from '../support/sqlite-builders.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

interface World {
  readonly knex: Knex;
  readonly ledger: BridgedLedger<Knex.Transaction>;
  /** The points table, qualified for this world. */
  readonly points: string;
  /** Where this world's outbox lives. */
  readonly outbox: { readonly table: string; readonly schema?: string };
  /** Where the relay and outbox.migrate() open their own transactions. */
  readonly outboxDatabase: OutboxDatabase;
  readonly balances: () => Promise<Record<string, number>>;
  readonly close: () => Promise<void>;
}

async function postgresWorld(): Promise<World> {
  const knex = knexFactory({ client: 'pg', connection: postgres.url, pool: { min: 0, max: 6 } });
  const schema = scratchSchema('oncemq_knexp');
  await knex.raw(`CREATE SCHEMA "${schema}"`);
  await knex.schema.withSchema(schema).createTable('points', (t) => {
    t.text('user_id').primary();
    t.integer('balance').notNullable();
  });
  return world(
    knex,
    knexLedger(knex, { schema }),
    `${schema}.points`,
    { table: 'oncemq_outbox', schema },
    async () => {
      await knex.raw(`DROP SCHEMA "${schema}" CASCADE`);
    },
  );
}

/** A SQLite file through Knex's better-sqlite3 client; the relay has a connection of its own. */
async function sqliteWorld(): Promise<World> {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'app.db');
  const knex = knexOnSqlite(path);
  await knex.schema.createTable('points', (t) => {
    t.text('user_id').primary();
    t.integer('balance').notNullable();
  });
  const relayDb = new Database(path, { timeout: 5000 });
  const drop = (): Promise<void> => {
    relayDb.close();
    scratch.remove();
    return Promise.resolve();
  };
  return world(knex, knexLedger(knex), 'points', { table: 'oncemq_outbox' }, drop, relayDb);
}

async function mysqlWorld(): Promise<World> {
  const knex = knexFactory({ client: 'mysql2', connection: mysql.url, pool: { min: 0, max: 6 } });
  const table = uniqueTable('knexp');
  await knex.schema.createTable(`${table}_points`, (t) => {
    t.string('user_id', 64).primary();
    t.integer('balance').notNullable();
  });
  return world(knex, knexLedger(knex, { table }), `${table}_points`, { table: `${table}_ob` }, async () => {
    for (const name of [`${table}_points`, table, `${table}_schema`, `${table}_ob`, `${table}_ob_keys`]) {
      await knex.schema.dropTableIfExists(name);
    }
  });
}

/** The options that put a second ledger on this world's table. */
function ledgerPlace(w: World): { schema?: string; table?: string } {
  return w.outbox.schema === undefined
    ? { table: w.outbox.table.replace(/_ob$/, '') }
    : { schema: w.outbox.schema };
}

function world(
  knex: Knex,
  ledger: BridgedLedger<Knex.Transaction>,
  points: string,
  outbox: World['outbox'],
  drop: () => Promise<void>,
  outboxDatabase: OutboxDatabase = knexBridge(knex),
): World {
  return {
    knex,
    ledger,
    points,
    outbox,
    outboxDatabase,
    balances: async () => {
      const rows = await knex<{ user_id: string; balance: number | string }>(points)
        .select()
        .orderBy('user_id');
      return Object.fromEntries(rows.map((r) => [r.user_id, Number(r.balance)]));
    },
    close: async () => {
      await ledger.close();
      await drop();
      await knex.destroy();
    },
  };
}

/** Adds the payment's points through `db`: the claim's transaction when `db` is ctx.tx. */
async function addPoints(
  db: Knex | Knex.Transaction,
  points: string,
  event: PaymentSucceeded,
): Promise<void> {
  await db(points)
    .insert({ user_id: event.userId, balance: event.amount })
    .onConflict('user_id')
    .merge({ balance: db.raw('?? + ?', [`${points.split('.').pop() ?? points}.balance`, event.amount]) });
}

for (const [database, open, available] of [
  ['PostgreSQL', postgresWorld, postgres.available],
  ['MariaDB', mysqlWorld, mysql.available],
  ['SQLite', sqliteWorld, true],
] as const) {
  describe.skipIf(!available)(`a pipeline on Knex (${database})`, () => {
    let w: World;
    beforeEach(async () => {
      w = await open();
      await w.ledger.init();
    });
    afterEach(async () => {
      await w.close();
    });

    const config = (handler: PipelineConfig<Knex.Transaction, PaymentSucceeded>['handler']) => ({
      ledger: w.ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler,
    });

    it('hands the handler a Knex transaction and applies each event once however many copies arrive', async () => {
      const seen: boolean[] = [];
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
        config(async (event, ctx) => {
          seen.push(ctx.tx.isTransaction === true);
          await addPoints(ctx.tx, w.points, event);
        }),
      );
      const events = paymentEvents(20);
      const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
      expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
      expect(seen.every(Boolean)).toBe(true);
      const total = Object.values(await w.balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(20 * 100);
    });

    it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
      let fail = true;
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
        config(async (event, ctx) => {
          await addPoints(ctx.tx, w.points, event);
          if (fail) throw new Error('downstream refused');
        }),
      );
      const event = payment(7);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(await w.balances()).toEqual({});
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
    });

    it('claims inside a Knex transaction of the application, which commits or rolls back the claim with its own writes', async () => {
      const event = payment(3);
      const request = {
        group: 'points',
        key: event.eventId,
        fingerprint: null,
        brokerId: 'b',
        topic: 'payments',
        leaseMs: 30_000,
      };
      await expect(
        w.knex.transaction(async (trx) => {
          const result = await w.ledger.join(trx).transaction(request, async (tx) => {
            expect(tx).toBe(trx);
            await addPoints(tx, w.points, event);
            return null;
          });
          expect(result.status).toBe('acquired');
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await w.balances()).toEqual({});

      await w.knex.transaction(async (trx) => {
        await w.ledger.join(trx).transaction(request, async (tx) => {
          await addPoints(tx, w.points, event);
          return null;
        });
      });
      expect((await w.ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
      const again = await w.knex.transaction((trx) => w.ledger.join(trx).transaction(request, () => null));
      expect(again.status).toBe('duplicate');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
    });

    it('writes outbox messages in the Knex transaction, and refuses the knex instance where a transaction is needed', async () => {
      const outbox = createOutbox({ ledger: w.ledger, ...w.outbox });
      await outbox.migrate(w.outboxDatabase);
      const pending = async (): Promise<string[]> => {
        const table = w.outbox.schema === undefined ? w.outbox.table : `${w.outbox.schema}.${w.outbox.table}`;
        const rows = await w
          .knex<{ business_key: string; id: number }>(table)
          .select('business_key')
          .orderBy('id');
        return rows.map((r) => r.business_key);
      };
      await expect(
        w.knex.transaction(async (trx) => {
          await outbox.add(trx, { topic: 'points-added', key: 'rolled-back', body: { n: 1 } });
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      await w.knex.transaction((trx) =>
        outbox.add(trx, { topic: 'points-added', key: 'committed', body: { n: 2 } }),
      );
      expect(await pending()).toEqual(['committed']);
      const bare = w.knex as unknown as Knex.Transaction;
      expect(() => w.ledger.join(bare)).toThrow(ConfigError);
      await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
        /expected a Knex transaction/,
      );
      expect(await pending()).toEqual(['committed']);
    });

    it.skipIf(database !== 'PostgreSQL')(
      'answers retry, never ack, when a database error caught inside the handler aborted the Knex transaction',
      async () => {
        const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
          config(async (event, ctx) => {
            await addPoints(ctx.tx, w.points, event);
            await ctx.tx.raw('SELECT 1/0').catch(() => undefined);
          }),
        );
        const event = payment(9);
        const outcome = await pipeline.process(paymentEnvelope(event));
        expect(outcome.action).toBe('retry');
        expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
        expect(await w.balances()).toEqual({});
      },
    );

    it('passes the rollback check when the handler writes through ctx.tx', async () => {
      const report = await checkRollback<Knex.Transaction, PaymentSucceeded>({
        pipeline: config(async function addPointsInTheClaim(event, ctx) {
          await addPoints(ctx.tx, w.points, event);
        }),
        envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
        observe: () => w.balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).not.toEqual({});
    });

    it.skipIf(database === 'SQLite')(
      'fails the rollback check, naming the handler, when it writes through the application’s own knex',
      async () => {
        const trap = config(async function addPointsOnTheAppKnex(event) {
          await addPoints(w.knex, w.points, event);
        });
        const check = checkRollback<Knex.Transaction, PaymentSucceeded>({
          pipeline: trap,
          envelopes: [paymentEnvelope(payment(1))],
          observe: () => w.balances(),
        });
        await expect(check).rejects.toThrow(RollbackCheckError);
        await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
        await expect(check).rejects.toThrow(
          /handler 'addPointsOnTheAppKnex' of group 'points' wrote outside/,
        );
      },
    );

    it.skipIf(database === 'SQLite')(
      'warns, once per claim, of a write the handler ran through the application’s knex instead of ctx.tx',
      async () => {
        const warnings: { message: string; fields: unknown }[] = [];
        const logger = {
          debug: () => undefined,
          info: () => undefined,
          warn: (message: string, fields?: unknown) => warnings.push({ message, fields }),
          error: () => undefined,
        };
        const ledger = knexLedger(w.knex, { ...ledgerPlace(w), logger });
        const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>({
          ...config(async (event, ctx) => {
            await addPoints(ctx.tx, w.points, event);
            await ctx.tx.transaction((inner) => addPoints(inner, w.points, event)); // a savepoint: same connection
            await w.knex(w.points).where({ user_id: event.userId }).select(); // a read: not reported
          }),
          ledger,
        });
        expect((await pipeline.process(paymentEnvelope(payment(1)))).kind).toBe('executed');
        expect(warnings).toEqual([]);
        const trap = createPipeline<Knex.Transaction, PaymentSucceeded>({
          ...config(async (event) => {
            await addPoints(w.knex, w.points, event);
            await addPoints(w.knex, w.points, event);
          }),
          ledger,
        });
        expect((await trap.process(paymentEnvelope(payment(2)))).kind).toBe('executed');
        expect(warnings).toHaveLength(1);
        expect(warnings[0]?.message).toMatch(
          /a write ran on another connection than the claim's transaction/,
        );
        expect(JSON.stringify(warnings[0]?.fields)).toMatch(/insert into/i);
      },
    );

    it.skipIf(database === 'SQLite')(
      'shows what the trap does in production: a commit lost after the handler doubles the escaped effect',
      async () => {
        let lose = true;
        const flaky = injectCommitFailures(w.ledger, {
          commitFailure: () => {
            const now = lose;
            lose = false;
            return now;
          },
        });
        const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>({
          ...config(async (event) => {
            await addPoints(w.knex, w.points, event);
          }),
          ledger: flaky,
        });
        const event = payment(5);
        expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
        expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
        expect(await w.balances()).toEqual({ [event.userId]: 200 });
      },
    );
  });
}

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
