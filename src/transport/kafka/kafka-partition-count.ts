import type { Admin } from '@platformatic/kafka';
import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { checkPartitionCount, type PartitionCountStore } from '../ordered/partition-count.js';
import type { OrderingOptions } from '../transport.js';
import type { KafkaNames } from './kafka-names.js';

/**
 * What an ordered member must drain before it consumes a grown topic further: per topic, the end
 * offsets its old partitions had at the change. A record of partition `p` at an offset below
 * `ends[p]` was published before the change; every other record (a new partition, or past the end)
 * waits until the group committed every old partition up to its end.
 */
export type KafkaDrain = ReadonlyMap<
  string,
  { readonly from: number; readonly to: number; readonly ends: readonly bigint[] }
>;

/**
 * The partition count an ordered group last consumed each topic with. Kafka keeps no such record,
 * and `@platformatic/kafka` commits no offset metadata, so it is the committed offset of partition 0
 * in a Kafka group of its own with no members (`<prefix>.<group>.partitions`); a drain's end offsets
 * are likewise the committed offsets of `<prefix>.<group>.drain`. Kafka only ever adds partitions,
 * so a count above the recorded one is a grown topic.
 */
export class KafkaPartitionCount {
  readonly #admin: Admin;
  readonly #names: KafkaNames;
  readonly #group: string;

  constructor(admin: Admin, names: KafkaNames, group: string) {
    this.#admin = admin;
    this.#names = names;
    this.#group = group;
  }

  /**
   * Checks every topic's partition count against the record (recording it on first use, see
   * `checkPartitionCount`): the same count needs nothing (unless a drain another member started is
   * still running: it is joined); a grown topic is refused with a `ConfigError` naming both counts, or,
   * with `onPartitionChange: 'drain'`, answered with the end offsets to drain first. A count below the
   * record is a recreated topic (Kafka only adds partitions), always refused.
   */
  async check(topics: readonly string[], ordering: OrderingOptions): Promise<KafkaDrain> {
    const drain = new Map<string, { from: number; to: number; ends: bigint[] }>();
    for (const topic of topics) {
      const count = await this.#partitionCount(topic);
      const refusal = (recorded: number): ConfigError => this.#refusal(topic, count, recorded);
      const { change, recorded } = await checkPartitionCount(this.#store(topic), {
        group: this.#group,
        count,
        ordering,
        refusal,
      });
      if (change === 'none') continue;
      if (recorded > count) throw refusal(recorded);
      drain.set(topic, { from: recorded, to: count, ends: await this.#ends(topic, recorded) });
    }
    return drain;
  }

  /**
   * The record of `topic`'s count: the committed offset of its partition 0 in the record group. Two
   * members writing the first record at once are not compared (the last one wins): both read the same
   * topic metadata, so they write the same count.
   */
  #store(topic: string): PartitionCountStore {
    return {
      where: `Kafka group '${this.#names.partitionRecordGroup(this.#group)}'`,
      read: async () => {
        const [recorded] = await this.#offsets(this.#names.partitionRecordGroup(this.#group), topic, 1);
        return recorded === undefined ? null : Number(recorded);
      },
      recordFirst: async (count) => {
        await this.record(topic, count);
        return count;
      },
    };
  }

  /** The refusal of a topic whose count differs from the record: grown, or recreated with fewer. */
  #refusal(topic: string, count: number, recorded: number): ConfigError {
    return new ConfigError(
      'ordering.onPartitionChange',
      `Kafka topic '${topic}' has ${count} partitions, and group '${this.#group}' last consumed it in order ` +
        `with ${recorded} (recorded in Kafka group '${this.#names.partitionRecordGroup(this.#group)}'): keys moved ` +
        `between partitions while their earlier records wait in the old ones. ` +
        (recorded > count
          ? 'The topic was recreated: delete the record group to start over'
          : `Subscribe with ordering: { onPartitionChange: 'drain' } to drain the old partitions first`),
    );
  }

  /** Records `count` for `topic` (a drain's end, or the first use) and forgets any drain of it. */
  async record(topic: string, count: number, drainedFrom?: number): Promise<void> {
    await this.#call('record the partition count', () =>
      this.#admin.alterConsumerGroupOffsets({
        groupId: this.#names.partitionRecordGroup(this.#group),
        topics: [{ name: topic, partitionOffsets: [{ partition: 0, offset: BigInt(count) }] }],
      }),
    );
    if (drainedFrom === undefined) return;
    // A later drain must not read these ends; another member may have removed them already.
    await this.#admin
      .deleteConsumerGroupOffsets({
        groupId: this.#names.drainGroup(this.#group),
        topics: [{ name: topic, partitionIndexes: Array.from({ length: drainedFrom }, (_, i) => i) }],
      })
      .catch(() => undefined);
  }

  /** Whether the group committed every old partition of `topic` up to its drain end. */
  async drained(topic: string, ends: readonly bigint[]): Promise<boolean> {
    const committed = await this.#offsets(this.#group, topic, ends.length);
    return ends.every((end, partition) => end === 0n || (committed[partition] ?? -1n) >= end);
  }

  /** The drain's end offsets: the ones a member already recorded, else the old partitions' ends now. */
  async #ends(topic: string, from: number): Promise<bigint[]> {
    const drainGroup = this.#names.drainGroup(this.#group);
    const recorded = await this.#offsets(drainGroup, topic, from);
    const known = recorded.filter((offset) => offset !== undefined);
    if (known.length === from) return known;
    const listed = await this.#call('list end offsets', () =>
      this.#admin.listOffsets({
        topics: [
          {
            name: topic,
            partitions: Array.from({ length: from }, (_, partitionIndex) => ({
              partitionIndex,
              timestamp: -1n,
            })),
          },
        ],
      }),
    );
    const ends = Array.from({ length: from }, () => 0n);
    for (const partition of listed[0]?.partitions ?? []) ends[partition.partitionIndex] = partition.offset;
    await this.#call('record the drain', () =>
      this.#admin.alterConsumerGroupOffsets({
        groupId: drainGroup,
        topics: [{ name: topic, partitionOffsets: ends.map((offset, partition) => ({ partition, offset })) }],
      }),
    );
    return ends;
  }

  async #partitionCount(topic: string): Promise<number> {
    const metadata = await this.#call('read topic metadata', () =>
      this.#admin.metadata({ topics: [topic], forceUpdate: true }),
    );
    return metadata.topics.get(topic)?.partitions.length ?? 0;
  }

  /** Committed offsets of partitions 0 … `count - 1` of `topic` in Kafka group `groupId` (`undefined`: none). */
  async #offsets(groupId: string, topic: string, count: number): Promise<(bigint | undefined)[]> {
    const groups = await this.#call('read committed offsets', () =>
      this.#admin.listConsumerGroupOffsets({
        groups: [
          {
            groupId,
            topics: [{ name: topic, partitionIndexes: Array.from({ length: count }, (_, i) => i) }],
          },
        ],
      }),
    );
    const found: (bigint | undefined)[] = Array.from({ length: count }, () => undefined);
    for (const partition of groups[0]?.topics.find((t) => t.name === topic)?.partitions ?? []) {
      if (partition.committedOffset >= 0n) found[partition.partitionIndex] = partition.committedOffset;
    }
    return found;
  }

  async #call<T>(what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new TransportUnavailableError(`kafka: cannot ${what}: ${errorText(error)}`, { cause: error });
    }
  }
}
