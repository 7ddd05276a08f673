// The settle example: what a consumer loop of your own does with an outcome. `action` settles the
// delivery; `kind` says what happened. docs/pipeline.md quotes the part between the region markers.
import type Database from 'better-sqlite3';
import { createEnvelope, createPipeline, type Outcome, type OutcomeKind } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';

/** The delivery as your broker client hands it to you. */
export interface Delivery {
  ack(): Promise<void>;
  redeliver(delayMs: number, deliveryCount: number): Promise<void>;
  deadLetter(reason: string): Promise<void>;
}

// #region example
export async function settle(
  outcome: Outcome,
  delivery: Delivery,
  counts: Record<OutcomeKind, number>,
): Promise<void> {
  counts[outcome.kind]++; // what happened: executed, duplicate, busy, conflict, retry or dead
  switch (outcome.action) {
    case 'ack': // executed or duplicate
      return delivery.ack();
    case 'retry': // busy or retry: the copy comes back later, carrying the count it is given
      return delivery.redeliver(outcome.delayMs, outcome.nextDeliveryCount);
    case 'dead-letter': // conflict or dead
      return delivery.deadLetter(outcome.reason);
  }
}
// #endregion example

/** Four deliveries (a new event, a copy of it, a body that is not JSON, a failing handler), settled. */
export async function run(db: Database.Database): Promise<{
  calls: string[];
  counts: Record<OutcomeKind, number>;
}> {
  db.exec('CREATE TABLE IF NOT EXISTS points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
  const pipeline = createPipeline<Database.Database, { eventId: string; userId: string }>({
    ledger: new SqliteLedger({ database: db }),
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: (event, ctx) => {
      if (event.userId === 'mallory') throw new Error('points service refused the user');
      ctx.tx.prepare('INSERT INTO points VALUES (?, 100)').run(event.userId);
    },
  });
  const calls: string[] = [];
  const delivery: Delivery = {
    ack: () => Promise.resolve(void calls.push('ack')),
    redeliver: (delayMs, count) => Promise.resolve(void calls.push(`redeliver ${delayMs}ms as #${count}`)),
    deadLetter: (reason) => Promise.resolve(void calls.push(`dead-letter ${reason}`)),
  };
  const counts: Record<OutcomeKind, number> = {
    executed: 0,
    duplicate: 0,
    busy: 0,
    conflict: 0,
    retry: 0,
    dead: 0,
  };
  for (const [brokerId, body] of [
    ['o-1', { eventId: 'pay-1', userId: 'alice' }],
    ['o-2', { eventId: 'pay-1', userId: 'alice' }],
    ['o-3', 'not json'],
    ['o-4', { eventId: 'pay-2', userId: 'mallory' }],
  ] as const) {
    await settle(
      await pipeline.process(createEnvelope({ brokerId, topic: 'payments', body })),
      delivery,
      counts,
    );
  }
  return { calls, counts };
}
