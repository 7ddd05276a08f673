import { describe, expect, it } from 'vitest';
import { RedisBatcher } from '../support/internal.js';

/** A batcher over fake sends that records every call it makes. */
function recording(
  options: {
    enabled?: boolean;
    maxBatch?: number;
    many?: (items: readonly number[]) => Promise<readonly (number | Error)[]>;
  } = {},
) {
  const singles: number[] = [];
  const batches: number[][] = [];
  const batcher = new RedisBatcher<number, number>(
    (item) => {
      singles.push(item);
      return Promise.resolve(item * 10);
    },
    (items) => {
      batches.push([...items]);
      return options.many ? options.many(items) : Promise.resolve(items.map((item) => item * 10));
    },
    { enabled: options.enabled ?? true, maxBatch: options.maxBatch ?? 128 },
  );
  return { batcher, singles, batches };
}

describe('RedisBatcher', () => {
  it('sends the calls of one turn as one batch and answers each caller with its own answer', async () => {
    const { batcher, singles, batches } = recording();
    const answers = await Promise.all([1, 2, 3, 4].map((item) => batcher.run(item)));
    expect(answers).toEqual([10, 20, 30, 40]);
    expect(batches).toEqual([[1, 2, 3, 4]]);
    expect(singles).toEqual([]);
  });

  it('sends a call that is alone in its turn as a single call', async () => {
    const { batcher, singles, batches } = recording();
    expect(await batcher.run(7)).toBe(70);
    expect(await batcher.run(8)).toBe(80);
    expect(singles).toEqual([7, 8]);
    expect(batches).toEqual([]);
  });

  it('splits a burst larger than the batch limit', async () => {
    const { batcher, singles, batches } = recording({ maxBatch: 3 });
    const answers = await Promise.all([1, 2, 3, 4, 5, 6, 7].map((item) => batcher.run(item)));
    expect(answers).toEqual([10, 20, 30, 40, 50, 60, 70]);
    expect(batches).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(singles).toEqual([7]);
  });

  it('fails only the caller whose answer is an error', async () => {
    const { batcher } = recording({
      many: (items) => Promise.resolve(items.map((item) => (item === 2 ? new Error('key 2 failed') : item))),
    });
    const settled = await Promise.allSettled([1, 2, 3].map((item) => batcher.run(item)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toEqual(new Error('key 2 failed'));
  });

  it('fails every caller of a batch that Redis refused, and keeps batching', async () => {
    const { batcher } = recording({ many: () => Promise.reject(new Error('connection lost')) });
    const settled = await Promise.allSettled([1, 2].map((item) => batcher.run(item)));
    expect(settled.every((s) => s.status === 'rejected')).toBe(true);
    expect(batcher.enabled).toBe(true);
  });

  it('fails every caller when the reply holds fewer answers than calls', async () => {
    const { batcher } = recording({ many: () => Promise.resolve([10]) });
    const settled = await Promise.allSettled([1, 2].map((item) => batcher.run(item)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected']);
  });

  it('turns batching off for good after a CROSSSLOT refusal and reruns the batch one call at a time', async () => {
    const cause = new Error("CROSSSLOT Keys in request don't hash to the same slot");
    const { batcher, singles, batches } = recording({
      many: () => Promise.reject(new Error('Redis ledger failed claiming', { cause })),
    });
    expect(await Promise.all([1, 2, 3].map((item) => batcher.run(item)))).toEqual([10, 20, 30]);
    expect(batcher.enabled).toBe(false);
    expect(await Promise.all([4, 5].map((item) => batcher.run(item)))).toEqual([40, 50]);
    expect(batches).toEqual([[1, 2, 3]]);
    expect(singles).toEqual([1, 2, 3, 4, 5]);
  });

  it('sends every call alone when configured off', async () => {
    const { batcher, singles, batches } = recording({ enabled: false });
    await Promise.all([1, 2, 3].map((item) => batcher.run(item)));
    expect(batches).toEqual([]);
    expect(singles).toEqual([1, 2, 3]);
  });
});
