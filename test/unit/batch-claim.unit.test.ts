import { describe, expect, it } from 'vitest';
import type { ClaimRequest } from 'oncemq';
import { planBatch } from '../support/internal.js';

const request = (group: string, key: string): ClaimRequest => ({
  group,
  key,
  fingerprint: null,
  brokerId: key,
  topic: 't',
  leaseMs: 1000,
});

describe('planBatch', () => {
  it('orders the distinct keys by (group, key) so concurrent batches lock rows in one global order', () => {
    const plan = planBatch([request('b', 'k1'), request('a', 'k9'), request('a', 'k2'), request('b', 'k0')]);
    expect(plan.distinct).toEqual([2, 1, 3, 0]);
  });

  it('claims a key repeated in the batch once and points its later copies at the first', () => {
    const plan = planBatch([request('g', 'x'), request('g', 'y'), request('g', 'x'), request('h', 'x')]);
    expect(plan.distinct).toEqual([0, 1, 3]);
    expect(plan.firstOf).toEqual([0, 1, 0, 3]);
  });

  it('keeps one key of two groups as two rows, even when they sort side by side', () => {
    const plan = planBatch([request('b', 'x'), request('a', 'x'), request('b', 'x')]);
    expect(plan.distinct).toEqual([1, 0]);
    expect(plan.firstOf).toEqual([0, 1, 0]);
  });
});
