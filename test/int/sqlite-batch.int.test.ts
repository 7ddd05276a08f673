import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPipeline } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import {
  addPoints,
  balance,
  openPointsDb,
  paymentEnvelope,
  scratchDir,
  type PaymentSucceeded,
} from '../support/points.js';

const events = (n: number): PaymentSucceeded[] =>
  Array.from({ length: n }, (_, i) => ({
    eventId: `evt-${i}`,
    orderId: `o-${i}`,
    userId: 'user-1',
    amount: 100,
  }));

describe('processBatch on a SQLite ledger', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let db: Database.Database;
  let ledger: SqliteLedger<Database.Database>;

  beforeEach(async () => {
    scratch = scratchDir();
    db = openPointsDb(join(scratch.dir, 'app.db'));
    ledger = new SqliteLedger({ database: db });
    await ledger.init();
  });

  afterEach(async () => {
    await ledger.close();
    db.close();
    scratch.remove();
  });

  it('claims a transactional batch in one transaction and applies each event once, copies included', async () => {
    const many = vi.spyOn(ledger, 'transactionMany');
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: (message, ctx) => {
        addPoints(ctx.tx, message.userId, message.amount);
        return { credited: message.amount, order: message.orderId };
      },
    });
    const batch = [...events(20), ...events(5)].map((e, i) => paymentEnvelope(e, `b-${i}`));
    const outcomes = await pipeline.processBatch(batch);
    expect(many).toHaveBeenCalledTimes(1);
    expect(outcomes.slice(0, 20).every((o) => o.kind === 'executed')).toBe(true);
    expect(outcomes.slice(20)).toMatchObject(
      // Each copy replays the result its own key stored.
      Array.from({ length: 5 }, (_, i) => ({
        kind: 'duplicate',
        source: 'republish',
        result: { credited: 100, order: `o-${i}` },
      })),
    );
    expect(balance(db, 'user-1')).toBe(2000);
  });

  it('runs a leased batch delivery by delivery, with process() semantics', async () => {
    const many = vi.spyOn(ledger, 'transactionMany');
    let runs = 0;
    const pipeline = createPipeline({
      ledger,
      group: 'mail',
      mode: 'leased',
      key: { jsonPath: 'eventId' },
      handler: () => {
        runs++;
      },
    });
    const outcomes = await pipeline.processBatch([...events(3), ...events(1)].map((e) => paymentEnvelope(e)));
    expect(outcomes.map((o) => o.kind)).toEqual(['executed', 'executed', 'executed', 'duplicate']);
    expect(runs).toBe(3);
    expect(many).not.toHaveBeenCalled();
  });

  it('holds the lease of every claim of a leased batch while earlier handlers run, so none expires waiting', async () => {
    const order: string[] = [];
    const pipeline = createPipeline<unknown, PaymentSucceeded>({
      ledger,
      group: 'mail',
      mode: 'leased',
      lease: '300ms',
      key: { jsonPath: 'eventId' },
      handler: async (event) => {
        order.push(event.eventId);
        await new Promise((resolve) => setTimeout(resolve, 150));
      },
    });
    const rival = createPipeline<unknown, PaymentSucceeded>({
      ledger,
      group: 'mail',
      mode: 'leased',
      key: { jsonPath: 'eventId' },
      handler: () => {
        order.push('rival');
      },
    });
    const batch = pipeline.processBatch(events(5).map((e) => paymentEnvelope(e)));
    // 600 ms in, evt-4 has waited twice its lease for its turn: a rival copy must still find it taken.
    await new Promise((resolve) => setTimeout(resolve, 600));
    const [last] = events(5).slice(4);
    if (last === undefined) throw new Error('unreachable');
    expect((await rival.process(paymentEnvelope(last, 'rival-copy'))).kind).toBe('busy');
    const outcomes = await batch;
    expect(outcomes.map((o) => o.kind)).toEqual(['executed', 'executed', 'executed', 'executed', 'executed']);
    expect(outcomes.filter((o) => o.kind === 'executed' && o.leaseLost)).toEqual([]);
    expect(order).toEqual(['evt-0', 'evt-1', 'evt-2', 'evt-3', 'evt-4']);
  });

  it('refuses a batch after close', async () => {
    const pipeline = createPipeline({ ledger, group: 'points', handler: () => undefined });
    pipeline.close();
    await expect(pipeline.processBatch([])).rejects.toThrow(/closed/);
  });
});
