// The payment-to-points consumer written with Drizzle, once per driver: each payment-succeeded event
// adds 100 points to its user once, however often it is delivered; the handler writes with Drizzle's
// query builder on the claim's transaction. docs/orm/drizzle.md quotes the parts between the region
// markers.
import { sql } from 'drizzle-orm';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import type { MySql2Database } from 'drizzle-orm/mysql2';
import { int, mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import { integer, pgTable, text } from 'drizzle-orm/pg-core';
import { integer as sqliteInteger, sqliteTable, text as sqliteText } from 'drizzle-orm/sqlite-core';
import { createEnvelope, createPipeline, type Outcome, type Pipeline } from 'oncemq';
import { drizzleLedger } from 'oncemq/drizzle';

interface PaymentSucceeded {
  eventId: string; // the business key: the same on every copy, whatever the broker id
  userId: string;
}

// #region postgres
const points = pgTable('points', {
  userId: text('user_id').primaryKey(),
  balance: integer('balance').notNull(),
});

export function pointsConsumer(db: NodePgDatabase) {
  return createPipeline({
    ledger: drizzleLedger(db), // each claim is one db.transaction()
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: async (event: PaymentSucceeded, ctx) => {
      // ctx.tx is the Drizzle transaction: the ledger row and the points commit together
      await ctx.tx
        .insert(points)
        .values({ userId: event.userId, balance: 100 })
        .onConflictDoUpdate({ target: points.userId, set: { balance: sql`${points.balance} + 100` } });
    },
  });
}
// #endregion postgres

// #region mysql
const mysqlPoints = mysqlTable('points', {
  userId: varchar('user_id', { length: 64 }).primaryKey(),
  balance: int('balance').notNull(),
});

export function mysqlPointsConsumer(db: MySql2Database) {
  return createPipeline({
    ledger: drizzleLedger(db), // each claim is one db.transaction()
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: async (event: PaymentSucceeded, ctx) => {
      await ctx.tx
        .insert(mysqlPoints)
        .values({ userId: event.userId, balance: 100 })
        .onDuplicateKeyUpdate({ set: { balance: sql`${mysqlPoints.balance} + 100` } });
    },
  });
}
// #endregion mysql

// #region sqlite
const sqlitePoints = sqliteTable('points', {
  userId: sqliteText('user_id').primaryKey(),
  balance: sqliteInteger('balance').notNull(),
});

export function sqlitePointsConsumer(db: BetterSQLite3Database) {
  return createPipeline({
    ledger: drizzleLedger(db), // each claim is BEGIN IMMEDIATE on db.$client
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: (event: PaymentSucceeded, ctx) => {
      // ctx.tx is db, inside the claim's transaction: synchronous, like better-sqlite3
      ctx.tx
        .insert(sqlitePoints)
        .values({ userId: event.userId, balance: 100 })
        .onConflictDoUpdate({
          target: sqlitePoints.userId,
          set: { balance: sql`${sqlitePoints.balance} + 100` },
        })
        .run();
    },
  });
}
// #endregion sqlite

/** Delivers one payment three times (a redelivery, then a republish) and answers the outcomes. */
export async function deliverThrice(consumer: Pipeline): Promise<Outcome['kind'][]> {
  const event: PaymentSucceeded = { eventId: 'pay-1', userId: 'alice' };
  const kinds: Outcome['kind'][] = [];
  for (const brokerId of ['m-1', 'm-1', 'm-2']) {
    kinds.push((await consumer.process(createEnvelope({ brokerId, topic: 'payments', body: event }))).kind);
  }
  return kinds;
}
