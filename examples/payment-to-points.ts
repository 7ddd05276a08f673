// The payment-to-points example: each payment-succeeded event adds 100 points to its user, once,
// however often the broker delivers it. README.md quotes the part between the region markers.
import Database from 'better-sqlite3';
import { createEnvelope, createPipeline, type Envelope } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';

// #region example
interface PaymentSucceeded {
  eventId: string; // the business key: the same on every copy, whatever the broker id
  userId: string;
}

export function pointsConsumer(db: Database.Database) {
  db.exec('CREATE TABLE IF NOT EXISTS points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
  return createPipeline<Database.Database, PaymentSucceeded>({
    ledger: new SqliteLedger({ database: db }), // the ledger lives in the business database
    group: 'points', // the same event is applied once per consumer group
    key: { jsonPath: 'eventId' },
    handler: (event, ctx) => {
      // ctx.tx is the claim's transaction: the ledger row and the points commit together
      ctx.tx
        .prepare(
          'INSERT INTO points VALUES (?, 100) ON CONFLICT (user_id) DO UPDATE SET balance = balance + 100',
        )
        .run(event.userId);
    },
  });
}
// Inside any consumer loop: const outcome = await consumer.process(envelope);
// outcome.action is 'ack', 'retry' (after outcome.delayMs) or 'dead-letter' (outcome.reason).
// #endregion example

/** Delivers one event three times, as a broker may after a lost ack and a producer retry. */
export async function run(db: Database.Database): Promise<{ actions: string[]; balance: number }> {
  const consumer = pointsConsumer(db);
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
  const row = db.prepare('SELECT balance FROM points WHERE user_id = ?').get('alice') as { balance: number };
  return { actions, balance: row.balance };
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const db = new Database(':memory:');
  console.log(await run(db));
  db.close();
}
