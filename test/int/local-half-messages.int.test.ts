import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Envelope, Logger } from 'oncemq';
import type { LocalBroker, TransactionState } from 'oncemq/local';
import { scratchDir, sleep } from '../support/points.js';
import { ackOutcome, testBroker, waitUntil } from '../support/local-points.js';
import { CHECK_MAX_TOPIC } from '../support/internal.js';

describe('transactional (half) messages on the local broker', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let broker: LocalBroker;
  let delivered: Envelope[];
  const warnings: string[] = [];
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (message) => warnings.push(message),
    error: () => undefined,
  };

  beforeEach(async () => {
    scratch = scratchDir();
    broker = testBroker(scratch.dir, { logger });
    delivered = [];
    warnings.length = 0;
    await broker.subscribe('g', ['orders'], (envelope) => {
      delivered.push(envelope);
      return Promise.resolve(ackOutcome(envelope));
    });
  });

  afterEach(async () => {
    await broker.close();
    scratch.remove();
  });

  /** Lets the consumer poll several times: what it has not seen by then is invisible to it. */
  const settle = (): Promise<void> => sleep(60);

  it('keeps a half message invisible while the local transaction runs, and delivers it after commit', async () => {
    const producer = await broker.createTransactionProducer({ group: 'p', check: () => 'UNKNOWN' });
    const result = await producer.sendInTransaction(
      { topic: 'orders', key: 'order-1', body: { id: 1 } },
      async (): Promise<TransactionState> => {
        await settle();
        expect(delivered).toHaveLength(0);
        expect(await broker.messages('orders')).toHaveLength(0);
        return 'COMMIT';
      },
    );
    expect(result.state).toBe('COMMIT');
    await waitUntil(() => delivered.length === 1, 'the committed message');
    expect(delivered[0]?.brokerId).toBe(result.receipt?.brokerId);
    expect(delivered[0]?.headers['oncemq-key']).toBe('order-1');
  });

  it('discards a half message whose local transaction rolls back', async () => {
    const producer = await broker.createTransactionProducer({ group: 'p', check: () => 'COMMIT' });
    const result = await producer.sendInTransaction(
      { topic: 'orders', key: 'order-2', body: {} },
      () => 'ROLLBACK',
    );
    expect(result.state).toBe('ROLLBACK');
    await settle();
    expect(delivered).toHaveLength(0);
    expect(broker.store.halfMessages.count()).toBe(0);
    expect(await producer.checkNow()).toBe(0);
  });

  it('resolves an UNKNOWN local transaction through the check-back, and only then delivers', async () => {
    let committed = false;
    const checks: number[] = [];
    const producer = await broker.createTransactionProducer({
      group: 'p',
      checkInterval: '20ms',
      check: (message) => {
        checks.push(message.checks);
        return committed ? 'COMMIT' : 'UNKNOWN';
      },
    });
    await producer.sendInTransaction({ topic: 'orders', key: 'order-3', body: {} }, () => {
      throw new Error('the local transaction is still running elsewhere');
    });
    await waitUntil(() => checks.length >= 2, 'two check-backs');
    expect(delivered).toHaveLength(0);
    committed = true;
    await waitUntil(() => delivered.length === 1, 'the message committed by check-back');
    expect(checks.slice(0, 2)).toEqual([0, 1]);
    expect(broker.store.halfMessages.count()).toBe(0);
  });

  it('moves a half message aside after 15 undecided check-backs, with a log line, never delivering it', async () => {
    const answers: TransactionState[] = [];
    const producer = await broker.createTransactionProducer({
      group: 'p',
      checkInterval: '5ms',
      check: () => {
        answers.push('UNKNOWN');
        return 'UNKNOWN';
      },
    });
    await producer.sendInTransaction({ topic: 'orders', key: 'order-4', body: {} }, () => 'UNKNOWN');
    await waitUntil(() => broker.store.halfMessages.count() === 0, 'the half message moved aside');
    await settle();
    expect(answers).toHaveLength(15);
    expect(delivered).toHaveLength(0);
    const aside = await broker.messages(CHECK_MAX_TOPIC);
    expect(aside).toHaveLength(1);
    expect(aside[0]?.headers['oncemq-real-topic']).toBe('orders');
    expect(warnings.some((line) => line.includes('15 check-backs') && line.includes(CHECK_MAX_TOPIC))).toBe(
      true,
    );
  });
});
