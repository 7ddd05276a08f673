// The batch example: a pipeline whose batchHandler applies the won events of a batch in one go, inside
// the claim's transaction. docs/pipeline.md quotes the part between the region markers.
import type Database from 'better-sqlite3';
import { createEnvelope, createPipeline, type Envelope } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';

interface PaymentSucceeded {
  eventId: string;
  userId: string;
}

// #region example
export function batchPointsConsumer(db: Database.Database) {
  db.exec('CREATE TABLE IF NOT EXISTS points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
  return createPipeline<Database.Database, PaymentSucceeded>({
    ledger: new SqliteLedger({ database: db }),
    group: 'points',
    key: { jsonPath: 'eventId' },
    // Only the events whose claim this batch won: duplicates are answered without it.
    batchHandler: (events, { tx }) => {
      const add = tx.prepare(
        'INSERT INTO points VALUES (?, 100) ON CONFLICT (user_id) DO UPDATE SET balance = balance + 100',
      );
      for (const { message } of events) add.run(message.userId);
      // A throw here rolls back the batch (ledger rows too); each delivery is then run on its own.
      return events.map(() => ({ batchOf: events.length })); // one result per event, replayed to its duplicates
    },
  });
}
// const outcomes = await pipeline.processBatch(envelopes); // one outcome per envelope, in order
// #endregion example

const payment = (brokerId: string, eventId: string, userId: string): Envelope =>
  createEnvelope({ brokerId, topic: 'payments', body: { eventId, userId } });

/** Two batches: three new events, then a redelivered one with a new one. */
export async function run(db: Database.Database): Promise<{
  outcomes: string[][];
  balances: Record<string, number>;
}> {
  const pipeline = batchPointsConsumer(db);
  const outcomes: string[][] = [];
  for (const batch of [
    [payment('o-1', 'pay-1', 'alice'), payment('o-2', 'pay-2', 'bob'), payment('o-3', 'pay-3', 'alice')],
    [payment('o-1', 'pay-1', 'alice'), payment('o-4', 'pay-4', 'bob')],
  ]) {
    const done = await pipeline.processBatch(batch);
    outcomes.push(done.map((o) => `${o.kind} ${'result' in o ? JSON.stringify(o.result) : ''}`.trim()));
  }
  const rows = db.prepare('SELECT user_id, balance FROM points ORDER BY user_id').all() as {
    user_id: string;
    balance: number;
  }[];
  return { outcomes, balances: Object.fromEntries(rows.map((r) => [r.user_id, r.balance])) };
}
