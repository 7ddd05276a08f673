import { randomBytes } from 'node:crypto';
import type { Ledger } from '../ledger/ledger.js';
import { quoteIdentifier } from '../ledger/sql-identifier.js';
import { resolveServiceUrl } from './connection.js';
import { DEMO_SQL, type DemoStore } from './demo-store.js';
import { loadDriver } from './stores.js';

/** Runs one statement with `?` placeholders and returns its rows. */
type Run = (sql: string, params?: readonly unknown[]) => Promise<readonly Record<string, unknown>[]>;

interface ServerParts<Tx> {
  readonly name: string;
  readonly ledger: Ledger<Tx>;
  /** Statements on the pool, each on its own (setup, the naive consumer, the checks). */
  readonly run: Run;
  /** Statements inside the ledger's transaction. */
  readonly runIn: (tx: Tx) => Run;
  readonly ledgerTable: string;
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
      return Number(rows[0]?.n ?? 0);
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
    close: parts.close,
  };
}

/** A fresh, valid identifier for the run's schema or database. */
function namespace(): string {
  return `oncemq_demo_${randomBytes(5).toString('hex')}`;
}

function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/** The demo on PostgreSQL: ledger and business tables in a schema created for the run. */
export async function openPostgresDemoStore(options: {
  url?: string;
  connections: number;
}): Promise<DemoStore> {
  const { url } = resolveServiceUrl('postgres', options.url);
  const pg = (await loadDriver(() => import('pg'), 'pg')).default;
  const { PostgresLedger } = await import('../ledger/postgres/postgres-ledger.js');
  const schema = namespace();
  const pool = new pg.Pool({
    connectionString: url,
    max: options.connections,
    options: `-c search_path=${schema}`,
  });
  const query: PgQueryable = pool;
  await query.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
  const ledger = new PostgresLedger({ pool, schema });
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
    async close() {
      await ledger.close();
      await query.query(`DROP SCHEMA ${quoteIdentifier(schema)} CASCADE`);
      await pool.end();
    },
  });
}

interface MysqlExecutable {
  query(sql: string, values?: unknown[]): Promise<readonly [unknown, unknown]>;
}

/** The demo on MySQL/MariaDB: ledger and business tables in a database created for the run. */
export async function openMysqlDemoStore(options: { url?: string; connections: number }): Promise<DemoStore> {
  const { url } = resolveServiceUrl('mysql', options.url);
  const mysql = await loadDriver(() => import('mysql2/promise'), 'mysql2');
  const { MysqlLedger } = await import('../ledger/mysql/mysql-ledger.js');
  const database = namespace();
  const admin = await mysql.createConnection({ uri: url });
  await admin.query(`CREATE DATABASE \`${database}\``);
  await admin.end();
  const pool = mysql.createPool({ uri: url, database, connectionLimit: options.connections });
  const ledger = new MysqlLedger({ pool });
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
    async close() {
      await ledger.close();
      await pool.query(`DROP DATABASE \`${database}\``);
      await pool.end();
    },
  });
}
