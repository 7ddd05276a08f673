import {
  CamelCasePlugin,
  Kysely,
  MysqlDialect,
  PostgresDialect,
  sql,
  type KyselyPlugin,
  type Transaction,
} from 'kysely';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createPool } from 'mysql2';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  createOutbox,
  createPipeline,
  createRelay,
  type OutboxDatabase,
  type PipelineConfig,
} from 'oncemq';
import { kyselyBridge, kyselyLedger, type BridgedLedger } from 'oncemq/kysely';
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
import { kyselyOnSqlite } from '../support/sqlite-builders.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** The points table, under the name each world gives it. */
type PointsDb = Record<string, { user_id: string; balance: number }>;
type Db = Kysely<PointsDb>;
type Trx = Transaction<PointsDb>;

interface World {
  readonly db: Db;
  readonly ledger: BridgedLedger<Trx>;
  /** Adds the payment's points through `db`: the claim's transaction when `db` is ctx.tx. */
  readonly addPoints: (db: Db, event: PaymentSucceeded) => Promise<unknown>;
  /** Where this world's outbox lives. */
  readonly outbox: { readonly table: string; readonly schema?: string };
  /** Where the relay and outbox.migrate() open their own transactions. */
  readonly outboxDatabase: OutboxDatabase;
  readonly pending: () => Promise<string[]>;
  readonly balances: () => Promise<Record<string, number>>;
  /** Another Kysely instance on the same database, with `plugins`; the caller destroys it. */
  readonly connect: (plugins: KyselyPlugin[]) => Db;
  /** A ledger on `db` in this world's namespace. */
  readonly ledgerOn: (db: Db) => BridgedLedger<Trx>;
  readonly close: () => Promise<void>;
}

function postgresDb(max: number, plugins: KyselyPlugin[]): Db {
  const pool = new pg.Pool({ connectionString: postgres.url, max });
  pool.on('error', () => undefined);
  return new Kysely<PointsDb>({ dialect: new PostgresDialect({ pool }), plugins });
}

async function postgresWorld(): Promise<World> {
  const db = postgresDb(6, []);
  const schema = scratchSchema('oncemq_kyselyp');
  await sql`CREATE SCHEMA ${sql.id(schema)}`.execute(db);
  await db.schema
    .withSchema(schema)
    .createTable('points')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('balance', 'integer', (c) => c.notNull())
    .execute();
  const outbox = { table: 'oncemq_outbox', schema };
  return world({
    db,
    ledgerOn: (on) => kyselyLedger(on, { schema }),
    connect: (plugins) => postgresDb(4, plugins),
    addPoints: (on, event) =>
      on
        .withSchema(schema)
        .insertInto('points')
        .values({ user_id: event.userId, balance: event.amount })
        .onConflict((oc) =>
          oc.column('user_id').doUpdateSet((eb) => ({ balance: eb('points.balance', '+', event.amount) })),
        )
        .execute(),
    inNamespace: (on) => on.withSchema(schema),
    points: 'points',
    outbox,
    drop: async () => {
      await sql`DROP SCHEMA ${sql.id(schema)} CASCADE`.execute(db);
    },
  });
}

function mysqlDb(max: number, plugins: KyselyPlugin[]): Db {
  return new Kysely<PointsDb>({
    dialect: new MysqlDialect({ pool: createPool({ uri: mysql.url, connectionLimit: max }) }),
    plugins,
  });
}

async function mysqlWorld(): Promise<World> {
  const db = mysqlDb(6, []);
  const table = uniqueTable('kyselyp');
  const points = `${table}_points`;
  await db.schema
    .createTable(points)
    .addColumn('user_id', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('balance', 'integer', (c) => c.notNull())
    .execute();
  const outbox = { table: `${table}_ob` };
  return world({
    db,
    ledgerOn: (on) => kyselyLedger(on, { table }),
    connect: (plugins) => mysqlDb(4, plugins),
    addPoints: (on, event) =>
      on
        .insertInto(points)
        .values({ user_id: event.userId, balance: event.amount })
        .onDuplicateKeyUpdate({ balance: sql`balance + ${event.amount}` })
        .execute(),
    inNamespace: (on) => on,
    points,
    outbox,
    drop: async () => {
      for (const name of [points, table, `${table}_schema`, `${table}_ob`, `${table}_ob_keys`]) {
        await db.schema.dropTable(name).ifExists().execute();
      }
    },
  });
}

/**
 * A SQLite file through Kysely's SqliteDialect; every Kysely instance has a better-sqlite3 connection of
 * its own, and the relay one more.
 */
async function sqliteWorld(): Promise<World> {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'app.db');
  const connections = new Map<Db, Database.Database>();
  const connect = (plugins: KyselyPlugin[]): Db => {
    const { db, database } = kyselyOnSqlite<PointsDb>(path, plugins);
    connections.set(db, database);
    return db;
  };
  const db = connect([]);
  await db.schema
    .createTable('points')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('balance', 'integer', (c) => c.notNull())
    .execute();
  const relayDb = new Database(path, { timeout: 5000 });
  return world({
    db,
    ledgerOn: (on) => {
      const database = connections.get(on);
      if (database === undefined) throw new Error('a Kysely instance of another world');
      return kyselyLedger(on, { database });
    },
    connect,
    addPoints: (on, event) =>
      on
        .insertInto('points')
        .values({ user_id: event.userId, balance: event.amount })
        .onConflict((oc) =>
          oc.column('user_id').doUpdateSet((eb) => ({ balance: eb('points.balance', '+', event.amount) })),
        )
        .execute(),
    inNamespace: (on) => on,
    points: 'points',
    outbox: { table: 'oncemq_outbox' },
    outboxDatabase: relayDb,
    drop: () => {
      relayDb.close();
      scratch.remove();
      return Promise.resolve();
    },
  });
}

function world(parts: {
  db: Db;
  outboxDatabase?: OutboxDatabase;
  ledgerOn: World['ledgerOn'];
  connect: World['connect'];
  addPoints: World['addPoints'];
  /** `db` with this world's schema, if it has one. */
  inNamespace: (db: Db) => Db;
  /** The points table. */
  points: string;
  outbox: World['outbox'];
  drop: () => Promise<void>;
}): World {
  const { db, ledgerOn, connect } = parts;
  const ledger = ledgerOn(db);
  return {
    db,
    ledger,
    ledgerOn,
    connect,
    addPoints: parts.addPoints,
    outbox: parts.outbox,
    outboxDatabase: parts.outboxDatabase ?? kyselyBridge(db),
    pending: async () => {
      const rows = await parts
        .inNamespace(db)
        .selectFrom(parts.outbox.table)
        .select(sql<string>`business_key`.as('key'))
        .orderBy(sql`id`)
        .execute();
      return rows.map((r) => r.key);
    },
    balances: async () => {
      const rows = await parts
        .inNamespace(db)
        .selectFrom(parts.points)
        .select(['user_id', 'balance'])
        .orderBy('user_id')
        .execute();
      return Object.fromEntries(rows.map((r) => [r.user_id, r.balance]));
    },
    close: async () => {
      await ledger.close();
      await parts.drop();
      await db.destroy();
    },
  };
}

const QUICK = { pollInterval: '10ms', minBackoff: '20ms', maxBackoff: '200ms' } as const;

for (const [database, open, available] of [
  ['PostgreSQL', postgresWorld, postgres.available],
  ['MariaDB', mysqlWorld, mysql.available],
  ['SQLite', sqliteWorld, true],
] as const) {
  describe.skipIf(!available)(`a pipeline on Kysely (${database})`, () => {
    let w: World;
    beforeEach(async () => {
      w = await open();
      await w.ledger.init();
    });
    afterEach(async () => {
      await w.close();
    });

    const config = (handler: PipelineConfig<Trx, PaymentSucceeded>['handler']) => ({
      ledger: w.ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler,
    });

    it('hands the handler a Kysely transaction and applies each event once however many copies arrive', async () => {
      const seen: boolean[] = [];
      const pipeline = createPipeline<Trx, PaymentSucceeded>(
        config(async (event, ctx) => {
          seen.push(ctx.tx.isTransaction);
          await w.addPoints(ctx.tx, event);
        }),
      );
      const events = paymentEvents(20);
      const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
      expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
      expect(seen).toHaveLength(20);
      expect(seen.every(Boolean)).toBe(true);
      const total = Object.values(await w.balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(20 * 100);
    });

    it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
      let fail = true;
      const pipeline = createPipeline<Trx, PaymentSucceeded>(
        config(async (event, ctx) => {
          await w.addPoints(ctx.tx, event);
          if (fail) throw new Error('downstream refused');
        }),
      );
      const event = payment(7);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(await w.balances()).toEqual({});
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
      expect((await pipeline.process(paymentEnvelope(event, 'b-3', 3))).kind).toBe('duplicate');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
    });

    it('claims inside a Kysely transaction of the application, which commits or rolls back the claim with its own writes', async () => {
      const event = payment(3);
      const request = {
        group: 'points',
        key: event.eventId,
        fingerprint: null,
        brokerId: 'b',
        topic: 'payments',
        leaseMs: 30_000,
      };
      const other = { ...event, userId: 'user-other' };
      await expect(
        w.db.transaction().execute(async (trx) => {
          await w.addPoints(trx, other);
          const result = await w.ledger.join(trx).transaction(request, async (tx) => {
            expect(tx).toBe(trx);
            await w.addPoints(tx, event);
            return null;
          });
          expect(result.status).toBe('acquired');
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await w.balances()).toEqual({});

      await w.db.transaction().execute(async (trx) => {
        await w.ledger.join(trx).transaction(request, async (tx) => {
          await w.addPoints(tx, event);
          return null;
        });
        await w.addPoints(trx, other);
      });
      expect((await w.ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
      const again = await w.db
        .transaction()
        .execute((trx) => w.ledger.join(trx).transaction(request, () => null));
      expect(again.status).toBe('duplicate');
      expect(await w.balances()).toEqual({ [event.userId]: 100, [other.userId]: 100 });
    });

    it('writes outbox messages in the Kysely transaction, relays them through the bridge, and refuses the Kysely instance where a transaction is needed', async () => {
      const outbox = createOutbox({ ledger: w.ledger, ...w.outbox });
      await outbox.migrate(w.outboxDatabase);
      await expect(
        w.db.transaction().execute(async (trx) => {
          await outbox.add(trx, { topic: 'points-added', key: 'rolled-back', body: { n: 1 } });
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      await w.db
        .transaction()
        .execute((trx) => outbox.add(trx, { topic: 'points-added', key: 'committed', body: { n: 2 } }));
      expect(await w.pending()).toEqual(['committed']);

      const bare = w.db as unknown as Trx;
      expect(() => w.ledger.join(bare)).toThrow(ConfigError);
      expect(() => w.ledger.join(bare)).toThrow(/expected a Kysely transaction/);
      await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
        /expected a Kysely transaction/,
      );
      await w.db.transaction().execute((trx) => {
        expect(() => kyselyLedger(trx)).toThrow(/expected the Kysely instance, not a transaction/);
        return Promise.resolve();
      });
      expect(await w.pending()).toEqual(['committed']);

      const sent: (string | undefined)[] = [];
      const relay = createRelay({
        outbox,
        transport: {
          name: 'memory',
          publish: (message) => {
            sent.push(message.key);
            return Promise.resolve({ brokerId: `m-${sent.length}`, topic: message.topic });
          },
        },
        database: w.outboxDatabase,
        ...QUICK,
      });
      expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 1, failed: 0 });
      expect(sent).toEqual(['committed']);
      expect(await relay.runOnce()).toMatchObject({ claimed: 0, published: 0 });
    });

    it('runs the ledger without the instance’s plugins: a CamelCasePlugin renames the handler’s columns, never the ledger’s', async () => {
      const camel = w.connect([new CamelCasePlugin()]);
      try {
        const ledger = w.ledgerOn(camel);
        const renamed: unknown[] = [];
        const pipeline = createPipeline<Trx, PaymentSucceeded>({
          ...config(async (event, ctx) => {
            renamed.push(await ctx.tx.selectNoFrom(sql<number>`1`.as('points_added')).executeTakeFirst());
            await w.addPoints(ctx.tx, event);
          }),
          ledger,
        });
        const event = payment(11);
        expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('executed');
        expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('duplicate');
        expect(renamed).toEqual([{ pointsAdded: 1 }]);
        const record = await ledger.get('points', event.eventId);
        expect(record).toMatchObject({
          group: 'points',
          key: event.eventId,
          status: 'SUCCESS',
          brokerId: `broker-${event.eventId}`,
          topic: 'payments',
        });
        expect(record).toEqual(await w.ledger.get('points', event.eventId));
        expect(await w.balances()).toEqual({ [event.userId]: 100 });
      } finally {
        await camel.destroy();
      }
    });

    it.skipIf(database !== 'PostgreSQL')(
      'answers retry, never ack, when a database error caught inside the handler aborted the Kysely transaction',
      async () => {
        const pipeline = createPipeline<Trx, PaymentSucceeded>(
          config(async (event, ctx) => {
            await w.addPoints(ctx.tx, event);
            await sql`SELECT 1/0`.execute(ctx.tx).catch(() => undefined);
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
      const report = await checkRollback<Trx, PaymentSucceeded>({
        pipeline: config(async function addPointsInTheClaim(event, ctx) {
          await w.addPoints(ctx.tx, event);
        }),
        envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
        observe: () => w.balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).not.toEqual({});
    });

    it.skipIf(database === 'SQLite')(
      'fails the rollback check, naming the handler, when it writes through the application’s own Kysely instance',
      async () => {
        const trap = config(async function addPointsOnTheAppDb(event) {
          await w.addPoints(w.db, event);
        });
        const check = checkRollback<Trx, PaymentSucceeded>({
          pipeline: trap,
          envelopes: [paymentEnvelope(payment(1))],
          observe: () => w.balances(),
        });
        await expect(check).rejects.toThrow(RollbackCheckError);
        await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
        await expect(check).rejects.toThrow(/handler 'addPointsOnTheAppDb' of group 'points' wrote outside/);
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
        const pipeline = createPipeline<Trx, PaymentSucceeded>({
          ...config(async (event) => {
            await w.addPoints(w.db, event);
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

describe('a pipeline on Kysely (SQLite): one connection, held by the claim', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let path: string;
  let app: { db: Db; database: Database.Database };
  let ledger: BridgedLedger<Trx>;
  const others: Db[] = [];
  const addPoints = (on: Db, event: PaymentSucceeded) =>
    on
      .insertInto('points')
      .values({ user_id: event.userId, balance: event.amount })
      .onConflict((oc) =>
        oc.column('user_id').doUpdateSet((eb) => ({ balance: eb('points.balance', '+', event.amount) })),
      )
      .execute();
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
    app = kyselyOnSqlite<PointsDb>(path);
    await app.db.schema
      .createTable('points')
      .addColumn('user_id', 'text', (c) => c.primaryKey())
      .addColumn('balance', 'integer', (c) => c.notNull())
      .execute();
    ledger = kyselyLedger(app.db, { database: app.database });
    await ledger.init();
  });
  afterEach(async () => {
    await ledger.close();
    await Promise.all(others.splice(0).map((db) => db.destroy()));
    await app.db.destroy();
    scratch.remove();
  });

  const config = (handler: PipelineConfig<Trx, PaymentSucceeded>['handler']) => ({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler,
  });

  it('makes the application’s db inside the handler wait for the connection the claim holds; abandoned, its write runs once the claim’s transaction has ended, outside it', async () => {
    const pipeline = createPipeline<Trx, PaymentSucceeded>(
      config(async (event, ctx) => {
        await addPoints(ctx.tx, event);
        const late = addPoints(app.db, { ...event, userId: 'late' });
        const waited = await Promise.race([
          late.then(() => 'ran'),
          new Promise((resolve) => setTimeout(() => resolve('still waiting'), 200)),
        ]);
        expect(waited).toBe('still waiting');
        throw new Error('gave up waiting');
      }),
    );
    const event = payment(1);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    await app.db.selectFrom('points').selectAll().execute(); // the queued write has run by now
    expect(balances()).toEqual({ late: 100 });
  });

  it('makes a claim on a second Kysely instance wait for the write lock of an open claim with the event loop running, not in SQLite: both commit', async () => {
    const other = kyselyOnSqlite<PointsDb>(path);
    others.push(other.db);
    const otherLedger = kyselyLedger(other.db, { database: other.database });
    await otherLedger.init();
    try {
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      const first = createPipeline<Trx, PaymentSucceeded>(
        config(async (event, ctx) => {
          await addPoints(ctx.tx, event); // the claim's transaction holds the write lock from here
          entered();
          await new Promise((resolve) => setTimeout(resolve, 300)); // a timer: it fires only if the thread is free
        }),
      ).process(paymentEnvelope(payment(1)));
      await inside;
      const started = Date.now();
      const second = await createPipeline<Trx, PaymentSucceeded>({
        ...config(async (event, ctx) => {
          await addPoints(ctx.tx, event);
        }),
        ledger: otherLedger,
      }).process(paymentEnvelope(payment(2)));
      expect(second.kind).toBe('executed');
      expect(Date.now() - started).toBeLessThan(4_000); // well inside the 5 s busy timeout of SQLite's own wait
      expect((await first).kind).toBe('executed');
      expect(balances()).toEqual({ 'user-1': 100, 'user-2': 100 });
    } finally {
      await otherLedger.close();
    }
  });

  it('lets consumers on two connections to one file process copies at once: each event is applied once, and no claim fails on the write lock', async () => {
    const other = kyselyOnSqlite<PointsDb>(path);
    others.push(other.db);
    const otherLedger = kyselyLedger(other.db, { database: other.database });
    try {
      const consumer = (l: BridgedLedger<Trx>) =>
        createPipeline<Trx, PaymentSucceeded>({
          ...config(async (event, ctx) => {
            await addPoints(ctx.tx, event);
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
      expect(Object.values(balances()).reduce((a, b) => a + b, 0)).toBe(10 * 100);
    } finally {
      await otherLedger.close();
    }
  });

  it('refuses an ended transaction, a database that is not the dialect’s, a SQLite Kysely without its database and the options of a server ledger', async () => {
    let ended: Trx | undefined;
    await app.db.transaction().execute((trx) => {
      ended = trx;
      return Promise.resolve();
    });
    const over = ended as Trx;
    expect(() => ledger.join(over)).toThrow(/this Kysely transaction has ended/);
    const outbox = createOutbox({ ledger });
    await expect(outbox.add(over, { topic: 't', key: 'late', body: {} })).rejects.toThrow(/has ended/);

    const stranger = new Database(path);
    try {
      const wrong = kyselyLedger(app.db, { database: stranger });
      await expect(wrong.init()).rejects.toThrow(/not the one under the Kysely instance/);
      await wrong.close();
    } finally {
      stranger.close();
    }
    expect(() => kyselyLedger(app.db)).toThrow(
      /needs the better-sqlite3 Database given to its SqliteDialect/,
    );
    expect(() => kyselyLedger(app.db, { database: app.database, schema: 'x' } as never)).toThrow(
      /schema: is not an option of a sqlite ledger/,
    );
    const onPg = new Kysely<PointsDb>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' }),
      }),
    });
    expect(() => kyselyLedger(onPg, { database: app.database })).toThrow(/does not use SqliteDialect/);
  });
});
