// The receipt example: a publish receipt written as JSON. A Kafka receipt carries its offset as a
// bigint, which JSON.stringify refuses. docs/transports/contract.md quotes the part between the markers.
import type { PublishReceipt } from 'oncemq';

// #region example
export function receiptJson(receipt: PublishReceipt): string {
  // A Kafka receipt also has `partition` and `offset`, a bigint: JSON.stringify(receipt) alone throws
  // "TypeError: Do not know how to serialize a BigInt". Write bigints as decimal strings.
  return JSON.stringify(receipt, (_key, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
}
// #endregion example
