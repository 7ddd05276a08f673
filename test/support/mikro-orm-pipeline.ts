import { EntitySchema, type EntityManager, type MikroORM } from '@mikro-orm/core';
import { MikroORM as MysqlOrm } from '@mikro-orm/mysql';
import { MikroORM as PostgresOrm } from '@mikro-orm/postgresql';
import { afterEach, beforeEach } from 'vitest';
import type { PipelineConfig } from 'oncemq';
import { mikroOrmLedger, type BridgedLedger } from 'oncemq/mikro-orm';
import { mysqlService, uniqueTable } from './mysql.js';
import { findPostgres, scratchSchema } from './postgres.js';
import type { PaymentSucceeded } from './points.js';

export const postgres = await findPostgres();
export const mysql = await mysqlService();

/** One credit of points per applied event: a row per effect, so an effect applied twice shows. */
export interface Credit {
  id: number;
  eventId: string;
  userId: string;
  amount: number;
}

export function creditEntity(tableName: string, schema?: string): EntitySchema<Credit> {
  return new EntitySchema<Credit>({
    name: 'Credit',
    tableName,
    schema,
    properties: {
      id: { type: 'number', primary: true, autoincrement: true },
      eventId: { type: 'string', fieldName: 'event_id' },
      userId: { type: 'string', fieldName: 'user_id' },
      amount: { type: 'number' },
    },
  });
}

export interface World {
  readonly orm: MikroORM;
  readonly credits: EntitySchema<Credit>;
  readonly ledger: BridgedLedger<EntityManager>;
  /** Where this world's ledger table lives (its schema or table option). */
  readonly where: { readonly schema?: string; readonly table?: string };
  /** Where this world's outbox lives. */
  readonly outbox: { readonly table: string; readonly schema?: string };
  /** The qualified, quoted outbox table. */
  readonly outboxTable: string;
  readonly close: () => Promise<void>;
}

export async function postgresWorld(): Promise<World> {
  const schema = scratchSchema('oncemq_mikrop');
  const credits = creditEntity('credits', schema);
  const orm: MikroORM = await PostgresOrm.init({
    clientUrl: postgres.url,
    pool: { min: 0, max: 6 },
    entities: [credits],
  });
  await orm.em.getConnection().execute(`CREATE SCHEMA "${schema}"`);
  await orm.em
    .getConnection()
    .execute(
      `CREATE TABLE "${schema}".credits (id serial PRIMARY KEY, event_id text NOT NULL, user_id text NOT NULL, amount int NOT NULL)`,
    );
  return {
    orm,
    credits,
    ledger: mikroOrmLedger(orm.em, { schema }),
    where: { schema },
    outbox: { table: 'oncemq_outbox', schema },
    outboxTable: `"${schema}".oncemq_outbox`,
    close: async () => {
      await orm.em.getConnection().execute(`DROP SCHEMA "${schema}" CASCADE`);
    },
  };
}

export async function mysqlWorld(): Promise<World> {
  const table = uniqueTable('mikrop');
  const credits = creditEntity(`${table}_credits`);
  const orm: MikroORM = await MysqlOrm.init({
    clientUrl: mysql.url,
    pool: { min: 0, max: 6 },
    entities: [credits],
  });
  await orm.em
    .getConnection()
    .execute(
      `CREATE TABLE \`${table}_credits\` (id INT AUTO_INCREMENT PRIMARY KEY, event_id VARCHAR(64) NOT NULL, user_id VARCHAR(64) NOT NULL, amount INT NOT NULL)`,
    );
  return {
    orm,
    credits,
    ledger: mikroOrmLedger(orm.em, { table }),
    where: { table },
    outbox: { table: `${table}_ob` },
    outboxTable: `\`${table}_ob\``,
    close: async () => {
      for (const name of [`${table}_credits`, table, `${table}_schema`, `${table}_ob`, `${table}_ob_keys`]) {
        await orm.em.getConnection().execute(`DROP TABLE IF EXISTS \`${name}\``);
      }
    },
  };
}

/** Each database a MikroORM pipeline runs on, how to open its world, and whether the machine has it. */
export const MIKRO_ORM_DATABASES = [
  ['PostgreSQL', postgresWorld, postgres.available],
  ['MariaDB', mysqlWorld, mysql.available],
] as const;

/** What the tests of one database share, on the world of the running test. */
export interface MikroOrmPipelineScope {
  /** Credits the payment's points in `em`'s unit of work, flushed when its transaction commits. */
  readonly credit: (em: EntityManager, event: PaymentSucceeded) => void;
  /** Points per user, read on a fresh EntityManager outside any claim. */
  readonly balances: () => Promise<Record<string, number>>;
  /** A points pipeline's config on the world's ledger. */
  readonly config: (
    handler: PipelineConfig<EntityManager, PaymentSucceeded>['handler'],
  ) => PipelineConfig<EntityManager, PaymentSucceeded>;
}

/** Opens a world with its ledger before each test of the calling describe, hands it to `opened`, and closes it after. */
export function mikroOrmPipelineScope(
  open: () => Promise<World>,
  opened: (world: World) => void,
): MikroOrmPipelineScope {
  let w: World;
  beforeEach(async () => {
    w = await open();
    opened(w);
    await w.ledger.init();
  });
  afterEach(async () => {
    await w.ledger.close();
    await w.close();
    await w.orm.close();
  });

  const credit = (em: EntityManager, event: PaymentSucceeded): void => {
    em.create(w.credits, { eventId: event.eventId, userId: event.userId, amount: event.amount });
  };

  const balances = async (): Promise<Record<string, number>> => {
    const rows = await w.orm.em.fork().find(w.credits, {}, { orderBy: { id: 'asc' } });
    const totals: Record<string, number> = {};
    for (const row of rows) totals[row.userId] = (totals[row.userId] ?? 0) + row.amount;
    return totals;
  };

  const config = (
    handler: PipelineConfig<EntityManager, PaymentSucceeded>['handler'],
  ): PipelineConfig<EntityManager, PaymentSucceeded> => ({
    ledger: w.ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler,
  });

  return { credit, balances, config };
}
