import Database from 'better-sqlite3';
import knexFactory, { type Knex } from 'knex';
import { Kysely, SqliteDialect, type KyselyPlugin } from 'kysely';

/** Knex on better-sqlite3 over a SQLite file in WAL mode; its pool is Knex's default for SQLite, one connection. */
export function knexOnSqlite(filename: string, config: Partial<Knex.Config> = {}): Knex {
  return knexFactory({
    client: 'better-sqlite3',
    connection: { filename },
    useNullAsDefault: true,
    pool: {
      afterCreate: (db: Database.Database, done: () => void) => {
        db.pragma('journal_mode = WAL');
        done();
      },
    },
    ...config,
  });
}

/** A Kysely instance on a better-sqlite3 connection of its own to a SQLite file in WAL mode, and that connection. */
export function kyselyOnSqlite<Db>(
  filename: string,
  plugins: KyselyPlugin[] = [],
): { db: Kysely<Db>; database: Database.Database } {
  const database = new Database(filename);
  database.pragma('journal_mode = WAL');
  return { db: new Kysely<Db>({ dialect: new SqliteDialect({ database }), plugins }), database };
}
