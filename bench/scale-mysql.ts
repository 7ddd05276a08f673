/**
 * The `scale` suite's MariaDB target, in a database of its own (`oncemq_scale` unless flagged): the
 * rows of scale-rows.ts loaded by `INSERT … SELECT FROM seq_<from>_to_<to>` (MariaDB's SEQUENCE
 * engine) in chunks of a million, one statement each, generated inside the server.
 */
import mysql from 'mysql2/promise';
import { MysqlLedger } from '../src/ledger/mysql/mysql-ledger.js';
import { DAY_MS, SCALE_DAYS, SCALE_GROUPS, SPREAD } from './scale-rows.js';
import type { FillMethod, LockWaits, ScaleTarget, TableBytes } from './scale-target.js';

const CHUNK = 1_000_000;

const groups = SCALE_GROUPS.map((g) => `'${g.group}'`).join(', ');
const topics = SCALE_GROUPS.map((g) => `'${g.topic}'`).join(', ');

/** Rows `from` to `to` (inclusive) of scale-rows.ts, before the span's end `?` (epoch ms). */
function loadSql(t: string, from: number, to: number): string {
  return `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until,
      broker_id, topic, remark, result, created_at, updated_at)
    SELECT ELT(g % 4 + 1, ${groups}),
      CONCAT_WS('-', SUBSTR(h, 1, 8), SUBSTR(h, 9, 4), SUBSTR(h, 13, 4), SUBSTR(h, 17, 4), SUBSTR(h, 21, 12)),
      CASE WHEN g % 10000 = 7 THEN 'PROCESSING' WHEN g % 100 = 3 THEN 'FAIL' ELSE 'SUCCESS' END,
      CONCAT(MD5(CONCAT('f', g)), MD5(CONCAT('F', g))),
      IF(g % 10000 = 7, CONCAT(MD5(CONCAT('o', g)), '.1'), NULL),
      IF(g % 100 = 3, 2, 1),
      IF(g % 10000 = 7, ts + 30000, NULL),
      CONCAT('msg-', g), ELT(g % 4 + 1, ${topics}),
      IF(g % 100 = 3, 'Error: the payment service timed out', NULL),
      IF(g % 10 = 1, CONCAT('{"balance":', g % 1000, '}'), NULL),
      IF(g % 100 = 3, ts - 60000, ts), ts
    FROM (SELECT seq AS g, MD5(CONCAT('k', seq)) AS h,
        ? - FLOOR((seq * ${SPREAD} - FLOOR(seq * ${SPREAD})) * ${SCALE_DAYS * DAY_MS}) AS ts
      FROM seq_${Math.trunc(from)}_to_${Math.trunc(to)}) AS s`;
}

/** The database name in a connection string replaced by `database`. */
function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

const quote = (name: string): string => `\`${name.replaceAll('`', '``')}\``;

/** The MariaDB target on database `database` (dropped first if a run left it), with a pool of `poolSize`. */
export async function mysqlScaleTarget(
  url: string,
  database: string,
  poolSize: number,
): Promise<ScaleTarget> {
  const admin = await mysql.createConnection({ uri: url });
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${quote(database)}`);
    await admin.query(`CREATE DATABASE ${quote(database)}`);
  } finally {
    await admin.end();
  }
  const pool = mysql.createPool({ uri: withDatabase(url, database), connectionLimit: poolSize });

  /** The table's keys as ALTER clauses: dropped before a load, added back after (one rebuild each). */
  const keyClauses = async (table: string): Promise<{ drop: string; add: string }> => {
    const [found] = await pool.query(
      `SELECT index_name AS name, column_name AS col FROM information_schema.statistics
       WHERE table_schema = ? AND table_name = ? ORDER BY index_name, seq_in_index`,
      [database, table],
    );
    const keys = new Map<string, string[]>();
    for (const row of found as { name: string; col: string }[]) {
      keys.set(row.name, [...(keys.get(row.name) ?? []), quote(row.col)]);
    }
    const names = [...keys.keys()];
    return {
      drop: names.map((n) => (n === 'PRIMARY' ? 'DROP PRIMARY KEY' : `DROP KEY ${quote(n)}`)).join(', '),
      add: names
        .map((n) => {
          const columns = (keys.get(n) ?? []).join(', ');
          return n === 'PRIMARY' ? `ADD PRIMARY KEY (${columns})` : `ADD KEY ${quote(n)} (${columns})`;
        })
        .join(', '),
    };
  };

  return {
    name: 'mysql',
    ledger: (table) => new MysqlLedger({ pool, table }),
    prepare: () => Promise.resolve(),
    async fill(table, from, to, endMs, method: FillMethod) {
      const keys = method === 'rebuild' ? await keyClauses(table) : undefined;
      if (keys !== undefined) await pool.query(`ALTER TABLE ${quote(table)} ${keys.drop}`);
      for (let start = from; start < to; start += CHUNK) {
        const end = Math.min(to, start + CHUNK) - 1;
        await pool.query(loadSql(quote(table), start, end), [endMs]);
      }
      if (keys !== undefined) await pool.query(`ALTER TABLE ${quote(table)} ${keys.add}`);
    },
    async clear(table) {
      await pool.query(`TRUNCATE TABLE ${quote(table)}`);
    },
    async analyze(table) {
      await pool.query(`ANALYZE TABLE ${quote(table)}`);
    },
    async bytes(table): Promise<TableBytes> {
      const [found] = await pool.query(
        `SELECT data_length AS data, index_length AS idx FROM information_schema.tables
         WHERE table_schema = ? AND table_name = ?`,
        [database, table],
      );
      const row = (found as { data: unknown; idx: unknown }[])[0];
      return { tableBytes: Number(row?.data ?? 0), indexBytes: Number(row?.idx ?? 0) };
    },
    async count(table) {
      const [found] = await pool.query(`SELECT COUNT(*) AS n FROM ${quote(table)}`);
      return Number((found as { n: unknown }[])[0]?.n ?? 0);
    },
    async lockWaits(): Promise<LockWaits> {
      const [found] = await pool.query(
        `SELECT COUNT(*) AS waiting,
           COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, trx_wait_started, NOW(6))) / 1000, 0) AS longest
         FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'`,
      );
      const row = (found as { waiting: unknown; longest: unknown }[])[0];
      return { waiting: Number(row?.waiting ?? 0), longestMs: Number(row?.longest ?? 0) };
    },
    async deadlocks() {
      const [found] = await pool.query(`SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'`);
      return Number((found as { Value: unknown }[])[0]?.Value ?? 0);
    },
    async drop() {
      await pool.query(`DROP DATABASE IF EXISTS ${quote(database)}`);
    },
    close: () => pool.end(),
  };
}
