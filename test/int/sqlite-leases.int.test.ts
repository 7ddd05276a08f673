import type Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createPipeline, PermanentError, RetryPolicy } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import {
  addPoints,
  balance,
  openPointsDb,
  payment,
  paymentEnvelope,
  scratchFileEachTest,
  sleep,
  type PaymentSucceeded,
} from '../support/points.js';

const event = payment(1);
const key = { jsonPath: 'eventId' } as const;

describe('leases, failures and retries on a SQLite ledger', () => {
  const scratch = scratchFileEachTest('app.db');

  it('renews the lease of a handler that outlives it, so a concurrent copy stays busy', async () => {
    const owner = new SqliteLedger({ database: scratch.path });
    const other = new SqliteLedger({ database: scratch.path });
    let executions = 0;
    const pipeline = (ledger: SqliteLedger) =>
      createPipeline({
        ledger,
        group: 'mail',
        mode: 'leased',
        key,
        lease: 300,
        renewEvery: 60,
        handler: async () => {
          executions++;
          await sleep(900);
        },
      });
    const running = pipeline(owner).process(paymentEnvelope(event));
    await sleep(600); // twice the lease: without renewal the copy would reclaim
    const copy = await pipeline(other).process(paymentEnvelope(event, 'copy-2'));
    expect(copy).toMatchObject({ kind: 'busy', action: 'retry', source: 'concurrent' });
    expect(await running).toMatchObject({ kind: 'executed', leaseLost: false });
    expect(executions).toBe(1);
    await owner.close();
    await other.close();
  });

  it('tells a handler that lost its lease through its signal and reports the completion as lease-lost', async () => {
    const slow = new SqliteLedger({ database: scratch.path });
    const later = new SqliteLedger({ database: scratch.path, clock: () => Date.now() + 3_600_000 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    let abortedInHandler = false;
    const first = createPipeline({
      ledger: slow,
      group: 'mail',
      mode: 'leased',
      key,
      lease: '30s',
      renewEvery: 50,
      handler: async (_message, ctx) => {
        started();
        await gate;
        abortedInHandler = ctx.signal.aborted;
      },
    }).process(paymentEnvelope(event));
    await handlerStarted;
    const takeover = await createPipeline({
      ledger: later,
      group: 'mail',
      mode: 'leased',
      key,
      handler: () => 'second',
    }).process(paymentEnvelope(event));
    expect(takeover).toMatchObject({ kind: 'executed', reclaimed: true, attempt: 2 });
    await sleep(150); // the first owner's next renewal finds the key taken
    release();
    expect(await first).toMatchObject({ kind: 'executed', leaseLost: true, attempt: 1 });
    expect(abortedInHandler).toBe(true);
    expect(await later.get('mail', 'evt-1')).toMatchObject({
      status: 'SUCCESS',
      attempt: 2,
      result: '"second"',
    });
    await slow.close();
    await later.close();
  });

  it('re-runs a failing handler in place for the immediate retries, rolling back each failed run', async () => {
    const db: Database.Database = openPointsDb(scratch.path);
    const ledger = new SqliteLedger({ database: db });
    let runs = 0;
    const outcome = await createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key,
      retry: RetryPolicy.rocketmq({ immediate: 2 }),
      handler: (message, ctx) => {
        addPoints(ctx.tx, message.userId, 100);
        if (++runs < 3) throw new Error(`transient ${runs}`);
      },
    }).process(paymentEnvelope(event));
    expect(outcome).toMatchObject({ kind: 'executed', attempt: 1 });
    expect(runs).toBe(3);
    expect(balance(db, 'user-1')).toBe(100);
    db.close();
  });

  it('dead-letters a PermanentError at once, recording the reason in the ledger', async () => {
    const ledger = new SqliteLedger({ database: scratch.path });
    let runs = 0;
    const outcome = await createPipeline({
      ledger,
      group: 'points',
      key,
      retry: RetryPolicy.rocketmq({ immediate: 3 }),
      handler: () => {
        runs++;
        throw new PermanentError('invalid', 'amount must be positive');
      },
    }).process(paymentEnvelope(event));
    expect(outcome).toMatchObject({ kind: 'dead', action: 'dead-letter', reason: 'permanent-error' });
    expect(runs).toBe(1);
    expect((await ledger.get('points', 'evt-1'))?.remark).toMatch(/amount must be positive/);
    await ledger.close();
  });

  it('never acks when the ledger database goes away: the delivery is retried', async () => {
    const db: Database.Database = openPointsDb(scratch.path);
    const ledger = new SqliteLedger({ database: db });
    let runs = 0;
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key,
      handler: (message, ctx) => {
        runs++;
        addPoints(ctx.tx, message.userId, 100);
      },
    });
    await pipeline.process(paymentEnvelope({ ...event, eventId: 'evt-0' }));
    db.close();
    const outcome = await pipeline.process(paymentEnvelope(event));
    expect(outcome).toMatchObject({ kind: 'retry', action: 'retry' });
    expect(outcome.kind === 'retry' && (outcome.error as Error).name).toBe('LedgerUnavailableError');
    expect(runs).toBe(1);
  });
});
