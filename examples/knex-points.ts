// The payment-to-points consumer written with Knex: each payment-succeeded event adds 100 points to
// its user once, however often it is delivered; the handler writes with Knex's query builder on the
// claim's transaction. docs/orm/knex.md quotes the part between the region markers.
import type { Knex } from 'knex';
import { createEnvelope, createPipeline, type Outcome } from 'oncemq';
import { knexLedger, type OrmLedgerConfig } from 'oncemq/knex';

// #region example
interface PaymentSucceeded {
  eventId: string; // the business key: the same on every copy, whatever the broker id
  userId: string;
}

export function pointsConsumer(knex: Knex, options: OrmLedgerConfig = {}) {
  return createPipeline<Knex.Transaction, PaymentSucceeded>({
    ledger: knexLedger(knex, options), // PostgreSQL, MySQL/MariaDB or SQLite, whichever knex talks to
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: async (event, ctx) => {
      // ctx.tx is a Knex transaction: the ledger row and the points commit together
      await ctx
        .tx('points')
        .insert({ user_id: event.userId, balance: 100 })
        .onConflict('user_id')
        .merge({ balance: ctx.tx.raw('points.balance + 100') });
    },
  });
}
// #endregion example

/** Creates the points table, delivers one payment three times and answers the outcomes and the balance. */
export async function run(
  knex: Knex,
  options: OrmLedgerConfig = {},
): Promise<{ kinds: Outcome['kind'][]; balance: number }> {
  await knex.schema.createTable('points', (t) => {
    t.string('user_id', 64).primary();
    t.integer('balance').notNullable();
  });
  const consumer = pointsConsumer(knex, options);
  const event: PaymentSucceeded = { eventId: 'pay-1', userId: 'alice' };
  const kinds: Outcome['kind'][] = [];
  for (const brokerId of ['m-1', 'm-1', 'm-2']) {
    kinds.push((await consumer.process(createEnvelope({ brokerId, topic: 'payments', body: event }))).kind);
  }
  const row = await knex<{ user_id: string; balance: number }>('points').where({ user_id: 'alice' }).first();
  return { kinds, balance: row?.balance ?? 0 };
}
