import type { Envelope } from '../core/envelope.js';
import type { Outcome } from '../core/outcome.js';
import type { DeliveryResult } from './settler.js';
import type { Processor } from './transport.js';

export type { DeliveryResult } from './settler.js';

/** A delivery a subscription settles at its broker once it has a result. */
export interface SettleableDelivery {
  readonly envelope: Envelope;
  settle(result: DeliveryResult): Promise<void>;
}

/**
 * Hands a batch to `processBatch` and settles each delivery with its outcome; a batch that throws
 * settles every delivery with the error, and a missing outcome is an error of its delivery.
 */
export async function processAndSettleBatch(
  processBatch: NonNullable<Processor['processBatch']>,
  batch: readonly SettleableDelivery[],
): Promise<void> {
  let outcomes: readonly (Outcome | undefined)[];
  try {
    outcomes = await processBatch(batch.map((delivery) => delivery.envelope));
  } catch (error) {
    await Promise.all(batch.map((delivery) => delivery.settle({ error })));
    return;
  }
  await Promise.all(
    batch.map((delivery, index) => {
      const outcome = outcomes[index];
      return outcome === undefined
        ? delivery.settle({ error: new Error(`processBatch answered no outcome for delivery ${index}`) })
        : delivery.settle({ outcome });
    }),
  );
}
