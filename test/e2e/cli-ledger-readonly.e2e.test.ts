import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';
import { scratchDir } from '../support/points.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';

const postgres = await findPostgres();
const mariadb = await mysqlService();

beforeAll(buildCli, 120_000);
afterAll(removeCli);

/** Every inspection action: none may create or migrate anything. */
const ACTIONS: readonly (readonly string[])[] = [
  ['stuck'],
  ['failed', '--group', 'points'],
  ['show', 'evt-1', '--group', 'points'],
  ['reset', 'evt-1', '--group', 'points', '--force'],
];

/** Runs every action against `store` flags: each exits 1 with a message matching every pattern. */
async function everyActionRefused(store: readonly string[], ...patterns: RegExp[]): Promise<void> {
  for (const action of ACTIONS) {
    const result = await oncemq(['ledger', ...action, ...store]);
    expect(result.code, `${action.join(' ')}: ${result.stdout}${result.stderr}`).toBe(1);
    for (const pattern of patterns) expect(result.stderr).toMatch(pattern);
  }
}

describe('oncemq ledger never creates anything on SQLite', () => {
  const scratch = scratchDir();
  afterAll(() => {
    scratch.remove();
  });

  it('pointed at a database file that does not exist, says so, exits 1 and creates no file', async () => {
    const path = join(scratch.dir, 'missing.db');
    await everyActionRefused(
      ['--store', 'sqlite', '--url', path],
      /does not exist/,
      /oncemq migrate --store sqlite/,
    );
    expect(existsSync(path)).toBe(false);
  });

  it('pointed at a file without the ledger table, names the table and the fix, exits 1 and creates no table', async () => {
    const path = join(scratch.dir, 'other.db');
    const db = new Database(path);
    db.exec('CREATE TABLE other (id INTEGER)');
    await everyActionRefused(
      ['--store', 'sqlite', '--url', path, '--table', 'ledger_x'],
      /ledger table "ledger_x" does not exist/,
      /oncemq migrate --store sqlite --url .*other\.db --table ledger_x/,
    );
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as {
      name: string;
    }[];
    expect(tables.map((t) => t.name)).toEqual(['other']);
    db.close();
  });

  it('refuses --schema and --database for a store without them, as wrong usage', async () => {
    const path = join(scratch.dir, 'usage.db');
    expect(
      (await oncemq(['ledger', 'stuck', '--store', 'sqlite', '--url', path, '--schema', 'x'])).code,
    ).toBe(2);
    expect((await oncemq(['migrate', '--store', 'sqlite', '--url', path, '--database', 'x'])).code).toBe(2);
    expect(existsSync(path)).toBe(false);
  });
});

describe.skipIf(!postgres.available)('oncemq migrate and ledger with --schema on PostgreSQL', () => {
  const admin = newPool(postgres.url, 1);
  const schema = scratchSchema('oncemq_cli');
  const url = ['--store', 'postgres', '--url', postgres.url];
  afterAll(async () => {
    await dropSchema(admin, schema);
    await admin.end();
  });

  it('pointed at a schema that does not exist, names the table and the fix, exits 1 and creates no schema', async () => {
    await everyActionRefused(
      [...url, '--schema', schema],
      new RegExp(`"${schema}"\\."oncemq_ledger" does not exist`),
      new RegExp(`oncemq migrate --store postgres --schema ${schema} --table oncemq_ledger`),
    );
    const { rows } = await admin.query('SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [
      schema,
    ]);
    expect(rows[0]).toEqual({ n: 0 });
  });

  it('migrate --schema creates the table in that schema; ledger --schema then reads it, and another table stays missing', async () => {
    const migrated = await oncemq(['migrate', ...url, '--schema', schema, '--table', 'cli_ledger']);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(migrated.stdout).toContain(`${schema}.cli_ledger`);
    const stuck = await oncemq(['ledger', 'stuck', ...url, '--schema', schema, '--table', 'cli_ledger']);
    expect(stuck.code, stuck.stderr).toBe(0);
    expect(stuck.stdout).toContain('no stuck claims');
    await everyActionRefused(
      [...url, '--schema', schema, '--table', 'cli_other'],
      /"cli_other" does not exist/,
    );
    const { rows } = await admin.query(
      'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1',
      [schema],
    );
    expect(rows.map((r: { table_name: string }) => r.table_name)).toEqual([
      'cli_ledger',
      'cli_ledger_schema',
    ]);
  });
});

describe.skipIf(!mariadb.available)('oncemq migrate and ledger with --database on MariaDB', () => {
  const admin = testPool(mariadb.url, { size: 1 });
  const table = uniqueTable('cli_ro');
  const database = `${table}_db`;
  const store = ['--store', 'mysql', '--url', mariadb.url];
  const tables = async (db: string): Promise<string[]> => {
    const [found] = await admin.query(
      'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1',
      [db],
    );
    return (found as { name: string }[]).map((row) => row.name);
  };
  afterAll(async () => {
    await dropLedgerTables(admin, table);
    await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
    await admin.end();
  });

  it('pointed at a table that does not exist, names it and the fix, exits 1 and creates nothing', async () => {
    await everyActionRefused(
      [...store, '--table', table],
      new RegExp(`\`test\`\\.\`${table}\` does not exist`),
      new RegExp(`oncemq migrate --store mysql --database test --table ${table}`),
    );
    expect((await tables('test')).filter((name) => name.startsWith(table))).toEqual([]);
  });

  it('pointed at a database that does not exist, says so and exits 1', async () => {
    await everyActionRefused(
      [...store, '--database', database],
      new RegExp(`database ${database} does not exist`),
    );
  });

  it('migrate --database creates the table in that database; ledger --database then reads it', async () => {
    await admin.query(`CREATE DATABASE \`${database}\``);
    const migrated = await oncemq(['migrate', ...store, '--database', database, '--table', table]);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(await tables(database)).toEqual([table, `${table}_schema`]);
    const failed = await oncemq(['ledger', 'failed', ...store, '--database', database, '--table', table]);
    expect(failed.code, failed.stderr).toBe(0);
    expect(failed.stdout).toContain('no failed claims');
  });
});
