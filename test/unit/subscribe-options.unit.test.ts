import { describe, expect, it } from 'vitest';
import { checkSubscribe } from '../support/internal.js';

const batching = { processBatch: () => Promise.resolve([]) };

describe('checkSubscribe: batchSize', () => {
  it('defaults to the concurrency within the broker limit, so a default subscribe is never refused for it', () => {
    // SQS receives at most 10; the default concurrency is 16.
    expect(checkSubscribe('g', ['t'], batching, {}, { maxBatchSize: 10 }).batchSize).toBe(10);
    expect(checkSubscribe('g', ['t'], batching, { concurrency: 4 }, { maxBatchSize: 10 }).batchSize).toBe(4);
    expect(checkSubscribe('g', ['t'], batching, { concurrency: 16 }).batchSize).toBe(16);
  });

  it('refuses a batchSize asked for over the broker limit, naming the field', () => {
    expect(() => checkSubscribe('g', ['t'], batching, { batchSize: 16 }, { maxBatchSize: 10 })).toThrow(
      /batchSize: must be a whole number from 1 to 10, got 16/,
    );
  });
});
