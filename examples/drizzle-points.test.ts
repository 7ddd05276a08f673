import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { findPostgres, newPool } from '../test/support/postgres.js';
import { mysqlService } from '../test/support/mysql.js';
import {
  deliverThrice,
  mysqlPointsConsumer,
  pointsConsumer,
  sqlitePointsConsumer,
} from './drizzle-points.js';

const postgres = await findPostgres();
const mariadb = await mysqlService();

/** A database of its own for one run, so that the ledger's and the points' tables start empty. */
const scratchDatabase = `oncemq_drizzle_example_${process.pid}`;

function onDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

describe('the Drizzle payment-to-points example', () => {
  it.skipIf(!postgres.available)(
    'adds 100 points once for one payment delivered three times, on PostgreSQL (node-postgres)',
    async () => {
      const admin = newPool(postgres.url, 1);
      await admin.query(`CREATE DATABASE "${scratchDatabase}"`);
      const pool = newPool(onDatabase(postgres.url, scratchDatabase), 4);
      try {
        await pool.query('CREATE TABLE points (user_id text PRIMARY KEY, balance integer NOT NULL)');
        expect(await deliverThrice(pointsConsumer(drizzlePg(pool)))).toEqual([
          'executed',
          'duplicate',
          'duplicate',
        ]);
        const { rows } = await pool.query('SELECT user_id, balance FROM points');
        expect(rows).toEqual([{ user_id: 'alice', balance: 100 }]);
      } finally {
        await pool.end();
        await admin.query(`DROP DATABASE "${scratchDatabase}"`);
        await admin.end();
      }
    },
  );

  it.skipIf(!mariadb.available)('does the same on MariaDB (mysql2)', async () => {
    const admin = await mysql.createConnection(mariadb.url);
    await admin.query(`CREATE DATABASE \`${scratchDatabase}\``);
    const pool = mysql.createPool({ uri: onDatabase(mariadb.url, scratchDatabase), connectionLimit: 4 });
    try {
      await pool.query('CREATE TABLE points (user_id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL)');
      expect(await deliverThrice(mysqlPointsConsumer(drizzleMysql(pool)))).toEqual([
        'executed',
        'duplicate',
        'duplicate',
      ]);
      const [rows] = await pool.query('SELECT user_id, balance FROM points');
      expect(rows).toEqual([{ user_id: 'alice', balance: 100 }]);
    } finally {
      await pool.end();
      await admin.query(`DROP DATABASE \`${scratchDatabase}\``);
      await admin.end();
    }
  });

  it('does the same on SQLite (better-sqlite3)', async () => {
    const client = new Database(':memory:');
    try {
      client.exec('CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
      expect(await deliverThrice(sqlitePointsConsumer(drizzleSqlite(client)))).toEqual([
        'executed',
        'duplicate',
        'duplicate',
      ]);
      expect(client.prepare('SELECT user_id, balance FROM points').all()).toEqual([
        { user_id: 'alice', balance: 100 },
      ]);
    } finally {
      client.close();
    }
  });

  it('is quoted in docs/orm/drizzle.md exactly as it compiles, one region per driver', () => {
    const source = readFileSync(new URL('./drizzle-points.ts', import.meta.url), 'utf8');
    const page = readFileSync(new URL('../docs/orm/drizzle.md', import.meta.url), 'utf8');
    for (const driver of ['postgres', 'mysql', 'sqlite']) {
      const region = new RegExp(`// #region ${driver}\\n([\\s\\S]*?)// #endregion ${driver}`).exec(
        source,
      )?.[1];
      expect(region, driver).toBeDefined();
      expect(page).toContain(region?.trim());
    }
  });
});
