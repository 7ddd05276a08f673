import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Pool as MysqlPool, PoolConnection } from 'mysql2/promise';
import type pg from 'pg';
import {
  createOutbox,
  RelayCrash,
  type RelayFaults,
  type Ledger,
  type Outbox,
  type OutboxDatabase,
  type OutgoingMessage,
  type PublishReceipt,
  type Transport,
} from 'oncemq';
import { MysqlLedger } from 'oncemq/mysql';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { SqliteLedger } from 'oncemq/sqlite';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from './mysql.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from './postgres.js';
import { scratchDir } from './points.js';

/**
 * One database under test for the outbox: a SQL ledger and an outbox on it, an `effects` table,
 * business transactions of the test's own, and relay databases (one pool or connection per relay,
 * as separate processes would have).
 */
export interface OutboxDb<Tx> {
  readonly name: 'postgres' | 'mysql' | 'sqlite';
  readonly ledger: Ledger<Tx>;
  readonly outbox: Outbox<Tx>;
  /** A database for one more relay (its own pool or connection). */
  relayDatabase(): OutboxDatabase;
  /** Where a relay in another process finds the outbox: a server URL or the SQLite file, and the table. */
  readonly location: { readonly url: string; readonly table: string; readonly schema?: string };
  /** Runs `work` in a business transaction of its own, committed unless it throws. */
  inTx<R>(work: (tx: Tx) => Promise<R>): Promise<R>;
  /** Records one effect of `key` in `tx`. */
  applyEffect(tx: Tx, key: string): Promise<void>;
  /** Effects recorded per key. */
  effects(): Promise<Map<string, number>>;
  /** Rows of the outbox not yet sent. */
  pending(): Promise<number>;
  /** Every row of the outbox (sent or not). */
  rows(): Promise<number>;
  close(): Promise<void>;
}

export interface OutboxDbFactory {
  readonly name: 'postgres' | 'mysql' | 'sqlite';
  /** Answers undefined (the suite skips) when the database is unreachable outside CI. */
  open(): Promise<OutboxDb<unknown> | undefined>;
}

async function generic<Tx>(
  base: Omit<OutboxDb<Tx>, 'applyEffect' | 'effects' | 'pending' | 'rows'> & { effectsTable: string },
): Promise<OutboxDb<Tx>> {
  const { dialect } = base.outbox;
  const p = (n: number): string => dialect.placeholder(n);
  const table = base.effectsTable;
  const messages = base.outbox.config.messages;
  await base.inTx((tx) => dialect.execute(tx, `CREATE TABLE ${table} (k VARCHAR(200) NOT NULL)`, []));
  const read = <R>(sql: string): Promise<R> =>
    base.inTx(async (tx) => (await dialect.query(tx, sql, [])) as R);
  return {
    ...base,
    applyEffect: async (tx, key) => {
      await dialect.execute(tx, `INSERT INTO ${table} (k) VALUES (${p(1)})`, [key]);
    },
    effects: async () => {
      const rows = await read<{ k: string; n: number | string }[]>(
        `SELECT k, COUNT(*) AS n FROM ${table} GROUP BY k`,
      );
      return new Map(rows.map((row) => [row.k, Number(row.n)]));
    },
    pending: async () =>
      Number(
        (await read<{ n: number }[]>(`SELECT COUNT(*) AS n FROM ${messages} WHERE sent_at IS NULL`))[0]?.n,
      ),
    rows: async () => Number((await read<{ n: number }[]>(`SELECT COUNT(*) AS n FROM ${messages}`))[0]?.n),
  };
}

async function openPostgres(): Promise<OutboxDb<PgClientLike> | undefined> {
  const service = await findPostgres();
  if (!service.available) return undefined;
  const schema = scratchSchema('oncemq_ob');
  const pool = newPool(service.url, 6);
  await pool.query(`CREATE SCHEMA "${schema}"`);
  const ledger = new PostgresLedger({ pool, schema });
  await ledger.init();
  const outbox = createOutbox({ ledger, schema });
  await outbox.migrate(pool);
  const pools: pg.Pool[] = [];
  return generic<PgClientLike>({
    name: 'postgres',
    ledger,
    outbox,
    effectsTable: `"${schema}".effects`,
    location: { url: service.url, table: outbox.table, schema },
    relayDatabase: () => {
      const relayPool = newPool(service.url, 2);
      pools.push(relayPool);
      return relayPool;
    },
    inTx: async (work) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const value = await work(client);
        await client.query('COMMIT');
        return value;
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    },
    close: async () => {
      await Promise.all(pools.map((p) => p.end()));
      await ledger.close();
      await dropSchema(pool, schema);
      await pool.end();
    },
  });
}

async function openMysql(): Promise<OutboxDb<PoolConnection> | undefined> {
  const service = await mysqlService();
  if (!service.available) return undefined;
  const pool: MysqlPool = testPool(service.url, { size: 6 });
  const table = uniqueTable('ob');
  const ledger = new MysqlLedger<PoolConnection>({ pool, table });
  await ledger.init();
  const outbox = createOutbox({ ledger, table: `${table}_out` });
  await outbox.migrate(pool);
  const pools: MysqlPool[] = [];
  return generic<PoolConnection>({
    name: 'mysql',
    ledger,
    outbox,
    effectsTable: `\`${table}_fx\``,
    location: { url: service.url, table: `${table}_out` },
    relayDatabase: () => {
      const relayPool = testPool(service.url, { size: 2 });
      pools.push(relayPool);
      return relayPool;
    },
    inTx: async (work) => {
      const conn = await pool.getConnection();
      try {
        await conn.query('START TRANSACTION');
        const value = await work(conn);
        await conn.query('COMMIT');
        return value;
      } catch (error) {
        await conn.query('ROLLBACK');
        throw error;
      } finally {
        conn.release();
      }
    },
    close: async () => {
      await Promise.all(pools.map((p) => p.end()));
      await ledger.close();
      await pool.query(`DROP TABLE IF EXISTS \`${table}_fx\`, \`${table}_out\`, \`${table}_out_keys\``);
      await dropLedgerTables(pool, table);
      await pool.end();
    },
  });
}

function openSqliteFile(path: string): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  return db;
}

async function openSqlite(): Promise<OutboxDb<Database.Database>> {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'app.db');
  const app = openSqliteFile(path);
  const business = openSqliteFile(path);
  const ledger = new SqliteLedger({ database: app });
  await ledger.init();
  const outbox = createOutbox({ ledger });
  await outbox.migrate(business);
  const opened: Database.Database[] = [app, business];
  // One transaction at a time on the business connection, as an application would queue them.
  let turn: Promise<unknown> = Promise.resolve();
  return generic<Database.Database>({
    name: 'sqlite',
    ledger,
    outbox,
    effectsTable: 'effects',
    location: { url: path, table: outbox.table },
    relayDatabase: () => {
      const db = openSqliteFile(path);
      opened.push(db);
      return db;
    },
    inTx: (work) => {
      const run = async () => {
        business.exec('BEGIN');
        try {
          const value = await work(business);
          business.exec('COMMIT');
          return value;
        } catch (error) {
          business.exec('ROLLBACK');
          throw error;
        }
      };
      const next = turn.then(run, run);
      turn = next.catch(() => undefined);
      return next;
    },
    close: async () => {
      await ledger.close();
      for (const db of opened) db.close();
      scratch.remove();
    },
  });
}

export const OUTBOX_DATABASES: readonly OutboxDbFactory[] = [
  { name: 'postgres', open: openPostgres },
  { name: 'mysql', open: openMysql },
  { name: 'sqlite', open: openSqlite },
];

/** A transport that counts the publishes of each business key before passing them on. */
export class CountingTransport {
  readonly name: string;
  readonly sent = new Map<string, number>();
  /** Business keys in the order their publishes were confirmed. */
  readonly order: string[] = [];

  constructor(private readonly inner: Pick<Transport, 'name' | 'publish'>) {
    this.name = inner.name;
  }

  async publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const receipt = await this.inner.publish(message);
    const key = message.key ?? '';
    this.sent.set(key, (this.sent.get(key) ?? 0) + 1);
    this.order.push(key);
    return receipt;
  }

  /** Keys published more than once. */
  doubles(): string[] {
    return [...this.sent].filter(([, n]) => n > 1).map(([key]) => key);
  }
}

/** Relay fault hooks that kill the relay before its `n`-th publish: the earlier ones went out, none is marked. */
export function crashBeforePublish(n: number): RelayFaults {
  let started = 0;
  return {
    beforePublish: () => {
      if (++started === n) throw new RelayCrash(`killed with ${n - 1} rows published and none marked`);
    },
  };
}
