import type Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createPipeline, type BatchHandler } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import {
  addPoints,
  balance,
  openPointsDb,
  payment,
  paymentEnvelope,
  scratchFileEachTest,
  type PaymentSucceeded,
} from '../support/points.js';

const key = { jsonPath: 'eventId' } as const;

describe('a batch handler applies the won events of a batch at once', () => {
  const scratch = scratchFileEachTest('app.db');

  const setup = (batchHandler: BatchHandler<Database.Database, PaymentSucceeded>) => {
    const db = openPointsDb(scratch.path);
    const ledger = new SqliteLedger({ database: db });
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key,
      batchHandler,
    });
    return { db, ledger, pipeline };
  };

  it('gets every won event once, in one call inside the claim transaction, and stores a result per event', async () => {
    const calls: string[][] = [];
    const { db, ledger, pipeline } = setup((events, ctx) => {
      calls.push(events.map((event) => event.message.eventId));
      for (const event of events) addPoints(ctx.tx, event.message.userId, 100);
      return events.map((event) => `credited ${event.context.key}`);
    });
    const events = [payment(1), payment(2), payment(3)];
    const first = await pipeline.processBatch(events.map((event) => paymentEnvelope(event)));
    expect(first.map((outcome) => outcome.kind)).toEqual(['executed', 'executed', 'executed']);
    expect(first.map((outcome) => (outcome as { result?: unknown }).result)).toEqual([
      'credited evt-1',
      'credited evt-2',
      'credited evt-3',
    ]);
    expect(calls).toEqual([['evt-1', 'evt-2', 'evt-3']]);
    // Copies of two of them and a new one: the handler sees only the new one; copies replay their result.
    const again = await pipeline.processBatch([
      paymentEnvelope(payment(1), 'copy-1'),
      paymentEnvelope(payment(4)),
      paymentEnvelope(payment(3), 'copy-3'),
    ]);
    expect(again.map((outcome) => outcome.kind)).toEqual(['duplicate', 'executed', 'duplicate']);
    // Each copy replays its own key's result, stored by the batch.
    expect(again[0]).toMatchObject({ result: 'credited evt-1' });
    expect(again[2]).toMatchObject({ result: 'credited evt-3' });
    expect(calls.at(-1)).toEqual(['evt-4']);
    expect(balance(db, 'user-1')).toBe(200); // evt-1 and evt-4
    await ledger.close();
  });

  it('a throw rolls the batch back; every delivery then runs on its own and only the poison fails', async () => {
    const { db, ledger, pipeline } = setup((events, ctx) => {
      for (const event of events) {
        if (event.message.eventId === 'evt-2') throw new Error('poison');
        addPoints(ctx.tx, event.message.userId, 100);
      }
    });
    const outcomes = await pipeline.processBatch([1, 2, 3].map((i) => paymentEnvelope(payment(i))));
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['executed', 'retry', 'executed']);
    expect(balance(db, 'user-1') + balance(db, 'user-2') + balance(db, 'user-0')).toBe(200);
    await ledger.close();
  });

  it('process() hands one event at a time to the batch handler', async () => {
    const sizes: number[] = [];
    const { ledger, pipeline } = setup((events, ctx) => {
      sizes.push(events.length);
      for (const event of events) addPoints(ctx.tx, event.message.userId, 100);
      return ['one'];
    });
    expect(await pipeline.process(paymentEnvelope(payment(1)))).toMatchObject({
      kind: 'executed',
      result: 'one',
    });
    expect(sizes).toEqual([1]);
    await ledger.close();
  });

  it('a result count that does not match the events is an error naming the batch handler', async () => {
    const { ledger, pipeline } = setup(() => ['only one']);
    const outcomes = await pipeline.processBatch([1, 2].map((i) => paymentEnvelope(payment(i))));
    // The batch fails as a whole, then each delivery alone returns the one result it should.
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['executed', 'executed']);
    const wrong = setup(() => ['a', 'b']);
    const outcome = await wrong.pipeline.process(paymentEnvelope(payment(7)));
    expect(outcome).toMatchObject({ kind: 'retry' });
    expect(String((outcome as { error: unknown }).error)).toMatch(
      /batchHandler: must return one result per event \(1\)/,
    );
    await ledger.close();
    await wrong.ledger.close();
  });

  it('is refused in leased mode, where there is no claim transaction', () => {
    const ledger = new SqliteLedger({ database: scratch.path });
    expect(() =>
      createPipeline({ ledger, group: 'points', key, mode: 'leased', batchHandler: () => undefined }),
    ).toThrow(/batchHandler.*'transactional'/);
  });
});
