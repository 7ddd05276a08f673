// The payment-to-points consumer written with Kysely on PostgreSQL: each payment-succeeded event adds
// 100 points to its user once, however often the broker delivers it. docs/orm/kysely.md quotes the
// part between the region markers.
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { createEnvelope, createPipeline, type Envelope } from 'oncemq';
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

/** Delivers one event three times, as a broker may after a lost ack and a producer retry. */
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
    const consumer = pointsConsumer(db, schema);
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

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  console.log(await run(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'));
}
