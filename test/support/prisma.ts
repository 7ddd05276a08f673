import { randomBytes } from 'node:crypto';
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { PrismaPg } from '@prisma/adapter-pg';
import mysql from 'mysql2/promise';
import type pg from 'pg';
import type { OutboxDatabase } from 'oncemq';
import {
  PrismaClient as MysqlPrismaClient,
  type Prisma as MysqlPrisma,
} from './prisma/generated/mysql/client.js';
import {
  PrismaClient as PostgresPrismaClient,
  type Prisma as PostgresPrisma,
} from './prisma/generated/postgres/client.js';
import { dropSchema, newPool, scratchSchema } from './postgres.js';

// The clients are generated from test/support/prisma/*.prisma by test/support/prisma-generate.js. Their
// tables are created here with SQL: Prisma's migrate and db push need its schema engine, a download.

export { MysqlPrismaClient, PostgresPrismaClient };
/** The transaction client of the PostgreSQL models: what `ctx.tx` is. */
export type PostgresPrismaTx = PostgresPrisma.TransactionClient;
/** The transaction client of the MySQL models. */
export type MysqlPrismaTx = MysqlPrisma.TransactionClient;

/** What a client of a scratch namespace is made with. */
export interface PrismaClientOptions {
  /** Connections of the client's pool. @default 4 */
  readonly max?: number;
  /** Options of the client's interactive transactions (Prisma's defaults: 2s to start, 5s to run). */
  readonly transactionOptions?: { maxWait?: number; timeout?: number };
}

/** A scratch namespace with the tables of the test models, its clients and a plain driver to check it. */
export interface PrismaNamespace<Client> {
  /** The PostgreSQL schema, or the MariaDB database. */
  readonly name: string;
  /** A new client on the namespace with a pool of its own (ended by drop()). */
  client(options?: PrismaClientOptions): Client;
  /** A pool of the driver (pg or mysql2) on the namespace: the outbox's migrate() and relay take it. */
  readonly pool: OutboxDatabase;
  /** Runs a statement with the driver (pg or mysql2) on the namespace; answers its rows. */
  query<R = Record<string, unknown>>(sql: string, values?: unknown[]): Promise<R[]>;
  /**
   * Locks the `points` row of `userId` (which must exist) from a connection of its own, in a
   * transaction held until the answered function is called.
   */
  lockPoints(userId: string): Promise<() => Promise<void>>;
  /** Disconnects every client and drops the namespace. */
  drop(): Promise<void>;
}

const POSTGRES_TABLES = (schema: string): string[] => [
  `CREATE TABLE "${schema}".effects (id serial PRIMARY KEY, key text NOT NULL)`,
  `CREATE TABLE "${schema}".points (user_id text PRIMARY KEY, balance integer NOT NULL)`,
  `CREATE TABLE "${schema}".payments (id text PRIMARY KEY, user_id text NOT NULL, amount integer NOT NULL)`,
];

const MYSQL_TABLES = [
  'CREATE TABLE effects (id INT AUTO_INCREMENT PRIMARY KEY, `key` VARCHAR(191) NOT NULL, KEY (`key`))',
  'CREATE TABLE points (user_id VARCHAR(191) PRIMARY KEY, balance INT NOT NULL)',
  'CREATE TABLE payments (id VARCHAR(191) PRIMARY KEY, user_id VARCHAR(191) NOT NULL, amount INT NOT NULL)',
];

/**
 * A fresh PostgreSQL schema holding the test models' tables; its clients reach it through the pg
 * adapter's `schema` option (model queries name it; the ledger is given it as `schema`).
 */
export async function prismaPostgresSchema(url: string): Promise<PrismaNamespace<PostgresPrismaClient>> {
  const schema = scratchSchema('oncemq_prisma');
  const admin: pg.Pool = newPool(url, 2);
  await admin.query(`CREATE SCHEMA "${schema}"`);
  for (const ddl of POSTGRES_TABLES(schema)) await admin.query(ddl);
  const clients: PostgresPrismaClient[] = [];
  return {
    name: schema,
    pool: admin,
    client(options = {}) {
      const adapter = new PrismaPg({ connectionString: url, max: options.max ?? 4 }, { schema });
      const client = new PostgresPrismaClient({ adapter, transactionOptions: options.transactionOptions });
      clients.push(client);
      return client;
    },
    async query<R>(sql: string, values: unknown[] = []) {
      return (await admin.query(sql, values)).rows as R[];
    },
    async lockPoints(userId) {
      const client = await admin.connect();
      await client.query('BEGIN');
      await client.query(`SELECT * FROM "${schema}".points WHERE user_id = $1 FOR UPDATE`, [userId]);
      return async () => {
        await client.query('ROLLBACK');
        client.release();
      };
    },
    async drop() {
      await Promise.all(clients.map((client) => client.$disconnect()));
      await dropSchema(admin, schema);
      await admin.end();
    },
  };
}

/** A fresh MariaDB/MySQL database holding the test models' tables; its clients connect to it. */
export async function prismaMysqlDatabase(url: string): Promise<PrismaNamespace<MysqlPrismaClient>> {
  const database = `oncemq_prisma_${randomBytes(5).toString('hex')}`;
  const server = new URL(url);
  const setup = await mysql.createConnection({ uri: url });
  try {
    await setup.query(`CREATE DATABASE \`${database}\``);
  } finally {
    await setup.end();
  }
  const admin = mysql.createPool({ uri: url, database, connectionLimit: 2 });
  for (const ddl of MYSQL_TABLES) await admin.query(ddl);
  const clients: MysqlPrismaClient[] = [];
  return {
    name: database,
    pool: admin,
    client(options = {}) {
      const adapter = new PrismaMariaDb({
        host: server.hostname,
        port: Number(server.port || 3306),
        user: decodeURIComponent(server.username),
        password: decodeURIComponent(server.password),
        database,
        connectionLimit: options.max ?? 4,
      });
      const client = new MysqlPrismaClient({ adapter, transactionOptions: options.transactionOptions });
      clients.push(client);
      return client;
    },
    async query<R>(sql: string, values: unknown[] = []) {
      const [rows] = await admin.query(sql, values);
      return rows as R[];
    },
    async lockPoints(userId) {
      const conn = await admin.getConnection();
      await conn.query('START TRANSACTION');
      await conn.query('SELECT * FROM points WHERE user_id = ? FOR UPDATE', [userId]);
      return async () => {
        await conn.query('ROLLBACK');
        conn.release();
      };
    },
    async drop() {
      await Promise.all(clients.map((client) => client.$disconnect()));
      await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
      await admin.end();
    },
  };
}
