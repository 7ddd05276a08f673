import { join } from 'node:path';
import { ConfigError } from '../core/errors.js';
import type { Ledger } from '../ledger/ledger.js';
import { openSqliteFile } from '../ledger/sqlite/sqlite-open.js';
import type { OutboxDatabase } from '../outbox/outbox-database.js';
import { quoteIdentifier } from '../ledger/sql-identifier.js';
import {
  SqliteLedger,
  type SqliteDatabaseLike,
  type SqliteStatementLike,
} from '../ledger/sqlite/sqlite-ledger.js';
import { SILENT_LOGGER } from '../core/logger.js';

/**
 * The demo's business data: a balance per user and one grant row per applied effect (no unique key,
 * so a double effect shows as a second row). The SQL is plain and portable; only the placeholders
 * differ per driver (`?` here; `$1` for pg).
 */
export const DEMO_SQL = Object.freeze({
  createPoints: 'CREATE TABLE demo_points (user_id VARCHAR(64) PRIMARY KEY, balance BIGINT NOT NULL)',
  createGrants:
    'CREATE TABLE demo_point_grants (event_id VARCHAR(200) NOT NULL, user_id VARCHAR(64) NOT NULL, points INTEGER NOT NULL)',
  insertUser: 'INSERT INTO demo_points (user_id, balance) VALUES (?, 0)',
  addPoints: 'UPDATE demo_points SET balance = balance + ? WHERE user_id = ?',
  insertGrant: 'INSERT INTO demo_point_grants (event_id, user_id, points) VALUES (?, ?, ?)',
  grantsPerEvent: 'SELECT event_id, COUNT(*) AS n FROM demo_point_grants GROUP BY event_id',
  grantedEvents: 'SELECT COUNT(DISTINCT event_id) AS n, COUNT(*) AS rows_n FROM demo_point_grants',
  balances: 'SELECT user_id, balance FROM demo_points',
});

/** One statement with `?` placeholders on a server store's pool, answering its rows. */
export type DemoSql = (
  sql: string,
  params?: readonly unknown[],
) => Promise<readonly Record<string, unknown>[]>;

/** A store the demo runs on: the ledger and the business write sharing its transactions. */
export interface DemoStore<Tx = unknown> {
  readonly name: string;
  readonly ledger: Ledger<Tx>;
  /** Creates the business tables and one zero balance per user. */
  setup(users: readonly string[]): Promise<void>;
  /** The business write inside the ledger's transaction (`ctx.tx`). */
  addPoints(tx: Tx, userId: string, eventId: string, points: number): void | Promise<void>;
  /** The same write without oncemq, each statement on its own (the naive consumer). */
  addPointsDirect(userId: string, eventId: string, points: number): Promise<void>;
  /** Grant rows per event id: the effects that became durable. */
  grantsPerEvent(): Promise<Map<string, number>>;
  /** Events with at least one grant row, and grant rows in all (a cheap progress count). */
  grantedEvents(): Promise<{ readonly events: number; readonly rows: number }>;
  balances(): Promise<Map<string, number>>;
  /** Ledger rows of a group. */
  ledgerRows(group: string): Promise<number>;
  /** Statements of their own on a server store's pool (the leased chaos run's audit). */
  readonly sql?: DemoSql;
  /** The ledger's table as a statement names it (server stores). */
  readonly ledgerTable?: string;
  /**
   * A database on the store for a writer of its own (the order service, an outbox relay): the pool
   * of a server store, a new connection on the SQLite file (closed with the store). A SQLite
   * connection never waits for the file's write lock (busy timeout 0): its caller retries, since a
   * synchronous wait would stop the process's event loop, and with it the other connection of the
   * process that holds the lock.
   */
  openDatabase(): Promise<OutboxDatabase>;
  /**
   * Kills every database connection of the run (of every process sharing its namespace) but the one
   * asking, as a failover or a restarted pool does; returns how many. Absent where there is no server.
   */
  killConnections?(): Promise<number>;
  /** The Redis cache's counters, for a store with one in front of its ledger. */
  cacheMetrics?(): { readonly hits: number; readonly misses: number; readonly writes: number };
  close(): Promise<void>;
}

/** Stores the demo runs on. */
export const DEMO_STORES = ['sqlite', 'postgres', 'mysql', 'tiered'] as const;

export interface DemoStoreOptions {
  readonly dir: string;
  readonly url?: string;
  readonly connections: number;
  /** Name of the run's namespace (schema, database). @default a fresh name */
  readonly namespace?: string;
  /**
   * The namespace is another process's (a chaos member joining the harness's run): neither created
   * nor dropped. Else it is created on open and dropped on close. @default false
   */
  readonly attach?: boolean;
}

/**
 * Opens the store named by `--store`. The one place the demo chooses a backend: point it at the
 * shared store factory once that exists.
 */
export async function openDemoStore(name: string, options: DemoStoreOptions): Promise<DemoStore> {
  if (name === 'postgres' || name === 'mysql') {
    const stores = await import('./demo-server-stores.js');
    return name === 'postgres' ? stores.openPostgresDemoStore(options) : stores.openMysqlDemoStore(options);
  }
  if (name === 'tiered') return (await import('./demo-tiered-store.js')).openTieredDemoStore(options);
  if (name !== 'sqlite') {
    throw new ConfigError('store', `'${name}' is not available in this build; use ${DEMO_STORES.join(', ')}`);
  }
  return openSqliteDemoStore(options);
}

/**
 * Opens the store of a demo run (`--store`, `--url`) in `dir` and sets up its users (`user-0`, `user-1`,
 * …, `users` of them, each with a zero balance); a store whose setup fails is closed again.
 */
export async function openRunStore(
  options: { readonly store: string; readonly url?: string; readonly users: number },
  dir: string,
  connections: number,
): Promise<{ store: DemoStore; users: string[] }> {
  const store = await openDemoStore(options.store, {
    dir,
    connections,
    ...(options.url === undefined ? {} : { url: options.url }),
  });
  const users = Array.from({ length: options.users }, (_, index) => `user-${index}`);
  try {
    await store.setup(users);
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
  return { store, users };
}

/** The ledger and the business tables in one SQLite file of the run's directory. */
export async function openSqliteDemoStore(
  options: DemoStoreOptions,
): Promise<DemoStore<SqliteDatabaseLike> & { readonly ledger: SqliteLedger }> {
  const path = join(options.dir, 'demo.db');
  const ledger = new SqliteLedger({ database: path, synchronous: 'normal', logger: SILENT_LOGGER });
  await ledger.init();
  const opened: SqliteDatabaseLike[] = [];
  const db = ledger.database;
  const run = (sql: string, ...params: unknown[]): void => {
    db.prepare(sql).run(...params);
  };
  let statements: { addPoints: SqliteStatementLike; insertGrant: SqliteStatementLike } | undefined;
  const write = (userId: string, eventId: string, points: number): void => {
    statements ??= {
      addPoints: db.prepare(DEMO_SQL.addPoints),
      insertGrant: db.prepare(DEMO_SQL.insertGrant),
    };
    statements.addPoints.run(points, userId);
    statements.insertGrant.run(eventId, userId, points);
  };
  const store: DemoStore<SqliteDatabaseLike> & { readonly ledger: SqliteLedger } = {
    name: 'sqlite',
    ledger,
    setup(users) {
      db.exec('BEGIN IMMEDIATE');
      run(DEMO_SQL.createPoints);
      run(DEMO_SQL.createGrants);
      for (const user of users) run(DEMO_SQL.insertUser, user);
      db.exec('COMMIT');
      return Promise.resolve();
    },
    addPoints: (_tx, userId, eventId, points) => {
      write(userId, eventId, points);
    },
    addPointsDirect(userId, eventId, points) {
      write(userId, eventId, points);
      return Promise.resolve();
    },
    grantsPerEvent() {
      const rows = db.prepare(DEMO_SQL.grantsPerEvent).all() as { event_id: string; n: number }[];
      return Promise.resolve(new Map(rows.map((row) => [row.event_id, row.n])));
    },
    grantedEvents() {
      const row = db.prepare(DEMO_SQL.grantedEvents).get() as { n: number; rows_n: number };
      return Promise.resolve({ events: row.n, rows: row.rows_n });
    },
    balances() {
      const rows = db.prepare(DEMO_SQL.balances).all() as { user_id: string; balance: number }[];
      return Promise.resolve(new Map(rows.map((row) => [row.user_id, row.balance])));
    },
    ledgerRows(group) {
      const row = db
        .prepare(
          `SELECT COUNT(*) AS n FROM ${quoteIdentifier(ledger.table)} WHERE consumer_group = ? AND status = 'SUCCESS'`,
        )
        .get(group) as { n: number };
      return Promise.resolve(row.n);
    },
    async openDatabase() {
      const own = await openSqliteFile(path, {
        busyTimeoutMs: 0,
        synchronous: 'normal',
        mustExist: true,
        fix: 'oncemq demo',
      });
      opened.push(own);
      return own;
    },
    async close() {
      for (const own of opened.splice(0)) own.close();
      await ledger.close();
    },
  };
  return store;
}
