import { describe, expect, it } from 'vitest';
import {
  createEnvelope,
  DELIVERY_COUNT_HEADER,
  readDeliveryCount,
  SILENT_LOGGER,
  type Envelope,
  type Outcome,
} from 'oncemq';
import { checkDeliveryCount, checkRetryDue, guardHeaders, outcomeFor } from '../support/internal.js';

const envelope = (id: string, count?: string): Envelope =>
  createEnvelope({
    brokerId: id,
    topic: 't',
    body: id,
    headers: count === undefined ? {} : { [DELIVERY_COUNT_HEADER]: count },
  });

describe('the header guard', () => {
  it('answers a delivery with a bad header as an invalid-header dead letter and hands the others on, in order', async () => {
    const seen: string[][] = [];
    const inner = {
      process: (e: Envelope): Promise<Outcome> => (
        seen.push([e.brokerId]),
        Promise.resolve(outcomeFor(e, 'ack', 0))
      ),
      processBatch: (es: readonly Envelope[]): Promise<readonly Outcome[]> => (
        seen.push(es.map((e) => e.brokerId)),
        Promise.resolve(es.map((e) => outcomeFor(e, 'ack', 0)))
      ),
    };
    const guarded = guardHeaders(inner, 'g', (e) => checkDeliveryCount(e.headers), SILENT_LOGGER);
    const outcomes = await guarded.processBatch?.([
      envelope('a'),
      envelope('b', '999999999'),
      envelope('c', '2'),
    ]);
    expect(seen).toEqual([['a', 'c']]);
    expect(outcomes?.map((o) => [o.brokerId, o.action])).toEqual([
      ['a', 'ack'],
      ['b', 'dead-letter'],
      ['c', 'ack'],
    ]);
    const dead = outcomes?.[1];
    expect(dead).toMatchObject({ kind: 'dead', reason: 'invalid-header', group: 'g' });
    expect((dead as { error: Error }).error.message).toContain(`'${DELIVERY_COUNT_HEADER}' = "999999999"`);
    // One good delivery left in a batch goes to process, and a batch of bad ones reaches nothing.
    await guarded.processBatch?.([envelope('d', '0'), envelope('e')]);
    await guarded.processBatch?.([envelope('f', 'x'), envelope('g', '-1')]);
    expect(seen).toEqual([['a', 'c'], ['e']]);
  });

  it('bounds delivery counts to 1 … 10,000 and due times to now + 7d + 5m', () => {
    expect(checkDeliveryCount({ [DELIVERY_COUNT_HEADER]: '10000' })).toBeUndefined();
    expect(checkDeliveryCount({ [DELIVERY_COUNT_HEADER]: '10001' })?.why).toMatch(/more than 10000/);
    expect(checkDeliveryCount({ [DELIVERY_COUNT_HEADER]: '01' })).toBeDefined();
    expect(checkDeliveryCount({ [DELIVERY_COUNT_HEADER]: '' })).toBeDefined();
    expect(readDeliveryCount({ [DELIVERY_COUNT_HEADER]: '999999999' })).toBe(1);
    expect(readDeliveryCount({ [DELIVERY_COUNT_HEADER]: '10000' })).toBe(10_000);
    const now = 1_800_000_000_000;
    const week = 7 * 86_400_000;
    expect(checkRetryDue('h', String(now + week + 300_000), now)).toBeUndefined();
    expect(checkRetryDue('h', String(now + week + 300_001), now)?.why).toMatch(/later than any retry/);
    expect(checkRetryDue('h', '0', now)).toBeUndefined();
    expect(checkRetryDue('h', '1.5e12', now)?.why).toMatch(/not a time/);
  });
});
