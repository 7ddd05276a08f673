import { Inject, Module, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { escapeIdentifier, Pool } from 'pg';
import { settings } from './settings';

export const PG_POOL = 'PG_POOL';

/** The `points` table, in the configured schema. */
export const POINTS_TABLE = `${escapeIdentifier(settings.schema)}.points`;

/** The application's pg pool: the points table and oncemq's ledger live in the same database. */
@Module({
  providers: [{ provide: PG_POOL, useFactory: () => new Pool({ connectionString: settings.databaseUrl }) }],
  exports: [PG_POOL],
})
export class DatabaseModule implements OnModuleInit, OnApplicationShutdown {
  constructor(@Inject(PG_POOL) private readonly pool: Pool) {}

  async onModuleInit() {
    await this.pool.query(`CREATE SCHEMA IF NOT EXISTS ${escapeIdentifier(settings.schema)}`);
    await this.pool.query(
      `CREATE TABLE IF NOT EXISTS ${POINTS_TABLE} (user_id text PRIMARY KEY, balance integer NOT NULL)`,
    );
  }

  /** The pool is the application's: it ends last, after oncemq's consumers drained. */
  async onApplicationShutdown() {
    await this.pool.end();
  }
}
