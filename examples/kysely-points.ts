// The payment-to-points consumer written with Kysely, on PostgreSQL and on SQLite: each
// payment-succeeded event adds 100 points to its user once, however often the broker delivers it.
// docs/orm/kysely.md quotes the parts between the region markers.
import Database from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { createEnvelope, createPipeline, type Envelope, type Pipeline } from 'oncemq';
import { kyselyLedger } from 'oncemq/kysely';

// #region example
interface PaymentSucceeded {
  eventId: string; // the business key: the same on every copy, whatever the broker id
  userId: string;
}

interface Db {
  points: { user_id: string; balance: number };
}

export function pointsConsumer(db: Kysely<Db>, schema = 'public') {
  return createPipeline({
    ledger: kyselyLedger(db, { schema }), // the ledger lives in the business database
    group: 'points', // the same event is applied once per consumer group
    key: { jsonPath: 'eventId' },
    handler: async (event: PaymentSucceeded, ctx) => {
      // ctx.tx is the claim's Kysely Transaction<Db>: the ledger row and the points commit together
      await ctx.tx
        .withSchema(schema)
        .insertInto('points')
        .values({ user_id: event.userId, balance: 100 })
        .onConflict((oc) =>
          oc.column('user_id').doUpdateSet((eb) => ({ balance: eb('points.balance', '+', 100) })),
        )
        .execute();
    },
  });
}
// Inside any consumer loop: const outcome = await consumer.process(envelope);
// #endregion example

// #region sqlite
export function sqlitePointsConsumer(db: Kysely<Db>, database: Database.Database) {
  return createPipeline({
    // database: the better-sqlite3 Database given to the SqliteDialect, which Kysely keeps to itself
    ledger: kyselyLedger(db, { database }),
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: async (event: PaymentSucceeded, ctx) => {
      // ctx.tx is the claim's Kysely Transaction<Db>, on the one connection the claim holds
      await ctx.tx
        .insertInto('points')
        .values({ user_id: event.userId, balance: 100 })
        .onConflict((oc) =>
          oc.column('user_id').doUpdateSet((eb) => ({ balance: eb('points.balance', '+', 100) })),
        )
        .execute();
    },
  });
}
// #endregion sqlite

/** Delivers one event three times, as a broker may after a lost ack and a producer retry. */
async function deliverThrice(consumer: Pipeline): Promise<string[]> {
  const copy = (brokerId: string, deliveryCount: number): Envelope =>
    createEnvelope({
      brokerId,
      topic: 'payments',
      body: { eventId: 'pay-1', userId: 'alice' },
      deliveryCount,
    });
  const actions: string[] = [];
  for (const envelope of [copy('offset-7', 1), copy('offset-7', 2), copy('offset-9', 1)]) {
    const outcome = await consumer.process(envelope);
    actions.push(`${outcome.kind}${outcome.kind === 'duplicate' ? ` (${outcome.source})` : ''}`);
  }
  return actions;
}

/** The PostgreSQL consumer on `databaseUrl`: the outcomes of three copies of one event, and the balance. */
export async function run(
  databaseUrl: string,
  schema = 'public',
): Promise<{ actions: string[]; balance: number }> {
  const db = new Kysely<Db>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl }) }),
  });
  try {
    await db.schema
      .withSchema(schema)
      .createTable('points')
      .ifNotExists()
      .addColumn('user_id', 'text', (c) => c.primaryKey())
      .addColumn('balance', 'integer', (c) => c.notNull())
      .execute();
    const actions = await deliverThrice(pointsConsumer(db, schema));
    const row = await db
      .withSchema(schema)
      .selectFrom('points')
      .select('balance')
      .where('user_id', '=', 'alice')
      .executeTakeFirstOrThrow();
    return { actions, balance: row.balance };
  } finally {
    await db.destroy();
  }
}

/** The SQLite consumer on the file `path`: the same three copies, the same answer. */
export async function runOnSqlite(path: string): Promise<{ actions: string[]; balance: number }> {
  const database = new Database(path);
  const db = new Kysely<Db>({ dialect: new SqliteDialect({ database }) });
  try {
    await db.schema
      .createTable('points')
      .ifNotExists()
      .addColumn('user_id', 'text', (c) => c.primaryKey())
      .addColumn('balance', 'integer', (c) => c.notNull())
      .execute();
    const actions = await deliverThrice(sqlitePointsConsumer(db, database));
    const row = await db
      .selectFrom('points')
      .select('balance')
      .where('user_id', '=', 'alice')
      .executeTakeFirstOrThrow();
    return { actions, balance: row.balance };
  } finally {
    await db.destroy(); // closes the database too
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  console.log(await run(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'));
}
