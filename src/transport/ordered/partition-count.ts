import { ConfigError } from '../../core/errors.js';
import type { OrderingOptions } from '../transport.js';

/**
 * Where a broker keeps an ordered group's partition count: a stream subject (NATS), a key (Redis
 * Streams), a marker queue (RabbitMQ), an empty group's offsets (Kafka). Reading and the first
 * record are the broker's; comparing, refusing and choosing a drain are {@link checkPartitionCount}'s.
 */
export interface PartitionCountStore {
  /** Where the record is, as a user finds it: `stream ONCEMQ_ordering`, `queue 'x'`, `key oncemq:…`. */
  readonly where: string;
  /** The recorded count, or null when none is recorded yet. */
  read(): Promise<number | null>;
  /**
   * Records `count` when nothing is recorded and answers the count recorded afterwards: `count`, or
   * what another member starting at the same time recorded first.
   */
  recordFirst(count: number): Promise<number>;
}

/** What a member found when it compared its partition count with its group's record. */
export type PartitionCountCheck =
  /** The record matches this member's count (or this member wrote the first record). */
  | { readonly change: 'none'; readonly recorded: number }
  /** Another count is recorded and the member was told to drain the group over to its own. */
  | { readonly change: 'drain'; readonly recorded: number };

/** What a member brings to the comparison. */
export interface PartitionCountRequest {
  readonly group: string;
  /** This member's configured partition count. */
  readonly count: number;
  readonly ordering?: OrderingOptions | undefined;
  /** False when the broker cannot drain here (topology `check` creates nothing): another count is refused. */
  readonly canDrain?: boolean;
  /** False when nothing may be recorded (topology `check`): no record is refused. */
  readonly canRecord?: boolean;
  /** Where the user reads how a drain works (a docs anchor). */
  readonly docs?: string;
  /**
   * The broker's own refusal, where `count` is not the member's configuration and the shared words
   * ("configured with", "Configure N") would mislead: Kafka's count is the topic's, which only grows.
   * @default {@link partitionCountError}
   */
  readonly refusal?: (recorded: number) => ConfigError;
}

/**
 * Records the group's partition count on first use, or compares it with the record: the same count
 * goes on; another count is refused with {@link partitionCountError} unless the member subscribed with
 * `ordering.onPartitionChange: 'drain'` (and the broker can drain), which answers `drain`. A new count
 * moves ordering keys between partitions while their earlier messages wait in the old ones: it is
 * never taken silently.
 */
export async function checkPartitionCount(
  store: PartitionCountStore,
  request: PartitionCountRequest,
): Promise<PartitionCountCheck> {
  const { group, count } = request;
  let recorded = await store.read();
  if (recorded === null) {
    if (request.canRecord === false) {
      throw new ConfigError(
        'topology',
        `ordered group '${group}' has no partition count recorded in ${store.where} (topology 'check' records nothing)`,
      );
    }
    recorded = await store.recordFirst(count);
  }
  if (recorded === count) return { change: 'none', recorded };
  const drain = (request.ordering?.onPartitionChange ?? 'refuse') === 'drain';
  if (!drain || request.canDrain === false) {
    throw request.refusal?.(recorded) ?? partitionCountError(store.where, request, recorded);
  }
  return { change: 'drain', recorded };
}

/** The refusal of a member whose partition count differs from its group's recorded one. */
export function partitionCountError(
  where: string,
  request: Pick<PartitionCountRequest, 'group' | 'count' | 'ordering' | 'canDrain' | 'docs'>,
  recorded: number,
): ConfigError {
  const { group, count } = request;
  const drain = (request.ordering?.onPartitionChange ?? 'refuse') === 'drain';
  const docs = request.docs === undefined ? '' : ` (${request.docs})`;
  return new ConfigError(
    'partitions',
    `group '${group}' is ordered over ${recorded} partitions (recorded in ${where}), and this member is ` +
      `configured with ${count}: a new count would move ordering keys between partitions while their ` +
      `earlier messages wait in the old ones. ` +
      (drain && request.canDrain === false
        ? `A drain creates what the new count consumes: it needs topology 'create'`
        : `Configure ${recorded}, or subscribe with ordering: { onPartitionChange: 'drain' } to drain the ` +
          `${recorded} partitions first${docs}`),
  );
}
