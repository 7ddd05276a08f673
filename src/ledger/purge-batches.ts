import type { PurgeOptions, PurgeResult } from './ledger.js';

/**
 * Deletes finished rows with `deleteBatch` (one bounded statement, its own short transaction) until a
 * batch deletes fewer than `batchSize` rows or `maxBatches` ran; `pause` runs between batches.
 */
export async function purgeInBatches(
  options: Required<PurgeOptions>,
  deleteBatch: () => Promise<number>,
  pause: () => Promise<void> = () => Promise.resolve(),
): Promise<PurgeResult> {
  let deleted = 0;
  let batches = 0;
  while (batches < options.maxBatches) {
    const changes = await deleteBatch();
    batches++;
    deleted += changes;
    if (changes < options.batchSize) break;
    await pause();
  }
  return { deleted, batches };
}
