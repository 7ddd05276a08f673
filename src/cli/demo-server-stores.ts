import { randomBytes } from 'node:crypto';
import { SILENT_LOGGER } from '../core/logger.js';
import type { Ledger } from '../ledger/ledger.js';
import { unreachableLedger } from '../ledger/ledger-errors.js';
import type { OutboxDatabase } from '../outbox/outbox-database.js';
import { quoteIdentifier } from '../ledger/sql-identifier.js';
import { resolveServiceUrl } from './connection.js';
import { DEMO_SQL, type DemoSql, type DemoStore } from './demo-store.js';
import { loadDriver } from './stores.js';

/** Runs one statement with `?` placeholders and returns its rows. */
type Run = DemoSql;

interface ServerParts<Tx> {
  readonly name: string;
  readonly ledger: Ledger<Tx>;
  /** Statements on the pool, each on its own (setup, the naive consumer, the checks). */
  readonly run: Run;
  /** Statements inside the ledger's transaction. */
  readonly runIn: (tx: Tx) => Run;
  readonly ledgerTable: string;
  readonly killConnections: () => Promise<number>;
  /** The store's pool, for a writer of its own. */
  readonly pool: OutboxDatabase;
  readonly close: () => Promise<void>;
}

/** The demo's business data on a database server, in a namespace made for the run and dropped after it. */
function serverStore<Tx>(parts: ServerParts<Tx>): DemoStore<Tx> {
  const { run } = parts;
  const write = async (exec: Run, userId: string, eventId: string, points: number): Promise<void> => {
    await exec(DEMO_SQL.addPoints, [points, userId]);
    await exec(DEMO_SQL.insertGrant, [eventId, userId, points]);
  };
  return {
    name: parts.name,
    ledger: parts.ledger,
    async setup(users) {
      await run(DEMO_SQL.createPoints);
      await run(DEMO_SQL.createGrants);
      for (let start = 0; start < users.length; start += 500) {
        const chunk = users.slice(start, start + 500);
        await run(
          `INSERT INTO demo_points (user_id, balance) VALUES ${chunk.map(() => '(?, 0)').join(', ')}`,
          chunk,
        );
      }
    },
    addPoints: (tx, userId, eventId, points) => write(parts.runIn(tx), userId, eventId, points),
    addPointsDirect: (userId, eventId, points) => write(run, userId, eventId, points),
    async grantsPerEvent() {
      const rows = await run(DEMO_SQL.grantsPerEvent);
      return new Map(rows.map((row) => [String(row.event_id), Number(row.n)]));
    },
    async grantedEvents() {
      const rows = await run(DEMO_SQL.grantedEvents);
      return { events: Number(rows[0]?.n ?? 0), rows: Number(rows[0]?.rows_n ?? 0) };
    },
    async balances() {
      const rows = await run(DEMO_SQL.balances);
      return new Map(rows.map((row) => [String(row.user_id), Number(row.balance)]));
    },
    async ledgerRows(group) {
      const rows = await run(
        `SELECT COUNT(*) AS n FROM ${parts.ledgerTable} WHERE consumer_group = ? AND status = 'SUCCESS'`,
        [group],
      );
      return Number(rows[0]?.n ?? 0);
    },
    sql: run,
    ledgerTable: parts.ledgerTable,
    killConnections: parts.killConnections,
    openDatabase: () => Promise.resolve(parts.pool),
    close: parts.close,
  };
}

/** A fresh, valid identifier for the run's schema or database. */
function namespace(): string {
  return `oncemq_demo_${randomBytes(5).toString('hex')}`;
}

/** Where a server store connects, and the run namespace it attaches to (see {@link DemoStoreOptions}). */
interface ServerStoreOptions {
  readonly url?: string;
  readonly connections: number;
  readonly namespace?: string;
  readonly attach?: boolean;
}

function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/** The demo on PostgreSQL: ledger and business tables in a schema created for the run. */
export async function openPostgresDemoStore(options: ServerStoreOptions): Promise<DemoStore> {
  const { url } = resolveServiceUrl('postgres', options.url);
  const pg = (await loadDriver(() => import('pg'), 'pg')).default;
  const { PostgresLedger } = await import('../ledger/postgres/postgres-ledger.js');
  const schema = options.namespace ?? namespace();
  const owned = options.attach !== true;
  const pool = new pg.Pool({
    connectionString: url,
    max: options.connections,
    options: `-c search_path=${schema}`,
    application_name: schema,
  });
  // A connection killed while idle (failover, pg_terminate_backend) leaves the pool; the next query opens another.
  pool.on('error', () => undefined);
  const query: PgQueryable = pool;
  if (owned) {
    await query.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`).catch(async (error: unknown) => {
      await pool.end();
      throw unreachableLedger('PostgreSQL', url, error) ?? error;
    });
  }
  const ledger = new PostgresLedger({ pool, schema, logger: SILENT_LOGGER });
  await ledger.init();
  const runOn =
    (client: PgQueryable): Run =>
    async (sql, params = []) =>
      (await client.query(numbered(sql), [...params])).rows;
  return serverStore({
    name: 'postgres',
    ledger: ledger as Ledger<PgQueryable>,
    run: runOn(query),
    runIn: (tx) => runOn(tx),
    ledgerTable: `${quoteIdentifier(schema)}.${quoteIdentifier(ledger.table)}`,
    pool,
    async killConnections() {
      const { rows } = await query.query(
        `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`,
        [schema],
      );
      return rows.filter((row) => row.killed === true).length;
    },
    async close() {
      await ledger.close();
      if (owned) await query.query(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`);
      await pool.end();
    },
  });
}

interface MysqlExecutable {
  query(sql: string, values?: unknown[]): Promise<readonly [unknown, unknown]>;
}

/** The demo on MySQL/MariaDB: ledger and business tables in a database created for the run. */
export async function openMysqlDemoStore(options: ServerStoreOptions): Promise<DemoStore> {
  const { url } = resolveServiceUrl('mysql', options.url);
  const mysql = await loadDriver(() => import('mysql2/promise'), 'mysql2');
  const { MysqlLedger } = await import('../ledger/mysql/mysql-ledger.js');
  const database = options.namespace ?? namespace();
  const owned = options.attach !== true;
  if (owned) {
    const admin = await mysql.createConnection({ uri: url }).catch((error: unknown) => {
      throw unreachableLedger('MySQL', url, error) ?? error;
    });
    await admin.query(`CREATE DATABASE \`${database}\``);
    await admin.end();
  }
  const pool = mysql.createPool({ uri: url, database, connectionLimit: options.connections });
  const ledger = new MysqlLedger({ pool, logger: SILENT_LOGGER });
  await ledger.init();
  const runOn =
    (client: MysqlExecutable): Run =>
    async (sql, params = []) => {
      const [rows] = await client.query(sql, [...params]);
      return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
    };
  return serverStore({
    name: 'mysql',
    ledger,
    run: runOn(pool),
    runIn: (tx) => runOn(tx),
    ledgerTable: ledger.table,
    pool,
    async killConnections() {
      const killer = await mysql.createConnection({ uri: url });
      try {
        const [rows] = await killer.query(
          'SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()',
          [database],
        );
        let killed = 0;
        for (const row of rows as { id: number }[]) {
          if (!Number.isSafeInteger(row.id)) continue;
          // A connection may end between the listing and the KILL: not an error.
          await killer.query(`KILL ${row.id}`).then(
            () => killed++,
            () => undefined,
          );
        }
        return killed;
      } finally {
        await killer.end();
      }
    },
    async close() {
      await ledger.close();
      if (owned) await pool.query(`DROP DATABASE \`${database}\``);
      await pool.end();
    },
  });
}
