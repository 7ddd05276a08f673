import type { Logger } from '../../core/logger.js';
import type { DeadLetterCause } from '../dead-letters.js';
import type { StreamCommands } from './redis-streams-commands.js';
import type { Delivery } from './redis-streams-delivery.js';
import { deadLetterFields, REPLAY_GROUP_FIELD } from './redis-streams-entry.js';
import { SHARD_SLOTS, type StreamKeys } from './redis-streams-names.js';
import {
  ORDERED_ACK,
  ORDERED_DEAD_LETTER,
  ORDERED_READ,
  TAKE_OVER,
} from './redis-streams-ordered-scripts.js';
import type { ReaderConnection } from './redis-streams-reader.js';
import {
  parseAutoClaim,
  parseStreams,
  replyNumber,
  replyText,
  type RawEntry,
} from './redis-streams-replies.js';
import { deliveryCounts } from './redis-streams-upkeep.js';

/** A partition this member holds the lease of. */
interface Partition {
  readonly index: number;
  readonly lease: string;
  readonly streams: readonly string[];
  /** Streams whose pending entries are still to be taken over, with the `XAUTOCLAIM` cursor. */
  readonly takeOver: Map<string, string>;
  /** Last entry id of each stream when a read found nothing new: a blocking `XREAD` waits from it. */
  readonly last: Map<string, string>;
}

/** An entry read with its fields (not deleted since it was added). */
export type ReadEntry = RawEntry & { readonly fields: ReadonlyMap<string, Uint8Array> };

/** Why a settle was refused: the lease or the entry is no longer this member's. */
export class NotOwnerError extends Error {
  override name = 'NotOwnerError' as const;
}

/** What the partitions of one ordered member are read for. */
export interface PartitionSite {
  readonly keys: StreamKeys;
  readonly group: string;
  readonly consumer: string;
  readonly topics: readonly string[];
  /** The member's partition count. */
  readonly count: number;
  /** The member's lease token. */
  readonly token: string;
  readonly blockMs: number;
  readonly logger: Logger;
  /** The key of partition `index`'s lease. */
  lease(index: number): string;
  /**
   * Takes the entries read (not a deleted one, nor another ordered group's replayed dead letter);
   * `counts` is absent for new entries (each delivered once so far).
   */
  accept(
    stream: string,
    entries: readonly ReadEntry[],
    counts: ReadonlyMap<string, number> | undefined,
  ): void;
  /** A script found a lease gone: the member runs a lease round at once. */
  fenced(): void;
}

/**
 * The partitions one ordered member holds, read and settled through scripts that each check the
 * partition's lease first (the fence). A partition taken, or read again after a restart, first takes
 * over every entry pending in its shards (`XAUTOCLAIM` from 0, whoever had them), in order, then reads
 * new ones; with nothing new, the member waits with a blocking `XREAD` on the reader's connection.
 */
export class StreamPartitions {
  readonly #owned = new Map<number, Partition>();

  constructor(
    private readonly reader: StreamCommands,
    private readonly commands: StreamCommands,
    private readonly connection: ReaderConnection,
    private readonly site: PartitionSite,
  ) {}

  /** The indexes held, in order. */
  get indexes(): number[] {
    return [...this.#owned.keys()].sort((a, b) => a - b);
  }

  /** Partitions held. */
  get size(): number {
    return this.#owned.size;
  }

  /** The shard streams of the partitions held. */
  get streams(): string[] {
    return [...this.#owned.values()].flatMap((partition) => partition.streams);
  }

  /** Whether partition `index` is held. */
  has(index: number): boolean {
    return this.#owned.has(index);
  }

  /** Partition `index` is held now: its pending entries are taken over before anything new is read. */
  take(index: number): void {
    this.#owned.set(index, this.#partition(index));
  }

  /** Partition `index` is no longer held. */
  drop(index: number): void {
    this.#owned.delete(index);
  }

  /** What was read is dropped: every partition takes over its pending entries again. */
  reset(): void {
    for (const index of this.#owned.keys()) this.take(index);
  }

  /** The shard streams of partition `index`, over every topic. */
  #partition(index: number): Partition {
    const { keys, topics, count } = this.site;
    const streams: string[] = [];
    for (const topic of topics) {
      for (let slot = index; slot < SHARD_SLOTS; slot += count) streams.push(keys.shard(topic, slot));
    }
    return {
      index,
      lease: this.site.lease(index),
      streams,
      takeOver: new Map(streams.map((stream) => [stream, '0-0'])),
      last: new Map(),
    };
  }

  /**
   * Reads up to `room` entries of each partition held while `current()` holds (the lane they are read
   * for is still the member's); waits for new entries when none came. True when entries came.
   */
  async read(room: number, current: () => boolean): Promise<boolean> {
    let read = false;
    for (const partition of [...this.#owned.values()]) {
      if (!current()) return read;
      if (await this.#read(partition, room, current)) read = true;
    }
    if (!read && current()) await this.#waitForNew();
    return read;
  }

  /** Takes over the partition's pending entries, then reads new ones; true when entries came. */
  async #read(partition: Partition, room: number, current: () => boolean): Promise<boolean> {
    const { group, consumer, token, logger } = this.site;
    const fixed = [token, group, consumer];
    if (partition.takeOver.size > 0) {
      let read = false;
      for (const [stream, cursor] of partition.takeOver) {
        const reply = await this.reader.script(
          TAKE_OVER,
          [partition.lease, stream],
          [...fixed, cursor, String(room)],
          { bytes: true },
        );
        if (!this.#fenced(reply, partition)) return false;
        const { next, entries, deleted } = parseAutoClaim((reply as unknown[])[1]);
        if (next === '0-0') partition.takeOver.delete(stream);
        else partition.takeOver.set(stream, next);
        if (deleted.length > 0) {
          logger.error('oncemq: pending entries were deleted from their shard before they were acked: lost', {
            group,
            stream,
            ids: deleted,
          });
        }
        if (entries.length === 0) continue;
        const counts = await deliveryCounts(this.commands, group, stream, entries);
        if (!current()) return false;
        this.#accept(stream, entries, counts);
        read = true;
      }
      if (read || partition.takeOver.size > 0) return read;
    }
    const reply = await this.reader.script(
      ORDERED_READ,
      [partition.lease, ...partition.streams],
      [...fixed, String(room)],
      { bytes: true },
    );
    if (!this.#fenced(reply, partition)) return false;
    const [kind, body] = reply as [unknown, unknown];
    if (replyNumber(kind) === 2) {
      const ids = Array.isArray(body) ? body : [];
      partition.streams.forEach((stream, i) => partition.last.set(stream, replyText(ids[i]) ?? '0-0'));
      return false;
    }
    if (!current()) return false;
    for (const [stream, entries] of parseStreams(body)) this.#accept(stream, entries, undefined);
    return true;
  }

  /** Hands the entries read to the member, except a deleted entry and another ordered group's replayed dead letter (acked). */
  #accept(
    stream: string,
    entries: readonly RawEntry[],
    counts: ReadonlyMap<string, number> | undefined,
  ): void {
    const { group, logger } = this.site;
    const kept: ReadEntry[] = [];
    for (const entry of entries) {
      if (entry.fields === null) {
        logger.error('oncemq: a pending entry was deleted from its shard before it was acked: lost', {
          group,
          stream,
          id: entry.id,
        });
        void this.ack(stream, entry.id).catch(() => undefined);
        continue;
      }
      const forGroup = entry.fields.get(REPLAY_GROUP_FIELD);
      if (forGroup !== undefined && Buffer.from(forGroup).toString('utf8') !== group) {
        // A dead letter of another ordered group replayed onto the shard: not this group's message.
        void this.ack(stream, entry.id).catch(() => undefined);
        continue;
      }
      kept.push({ ...entry, fields: entry.fields });
    }
    if (kept.length > 0) this.site.accept(stream, kept, counts);
  }

  /** False (and a lease round at once) when a script found the lease gone. */
  #fenced(reply: unknown, partition: Partition): boolean {
    if (Array.isArray(reply) && replyNumber(reply[0]) !== 0) return true;
    this.site.logger.warn('oncemq: the lease of a partition is no longer this member’s', {
      group: this.site.group,
      partition: partition.index,
    });
    this.site.fenced();
    return false;
  }

  /** Waits on the reader's connection until a shard held has a new entry, or the block time passes. */
  async #waitForNew(): Promise<void> {
    const streams: string[] = [];
    const from: string[] = [];
    for (const partition of this.#owned.values()) {
      for (const stream of partition.streams) {
        const last = partition.last.get(stream);
        // Not read yet since it was taken: read first ('$' would miss what came meanwhile).
        if (last === undefined) return;
        streams.push(stream);
        from.push(last);
      }
    }
    if (streams.length === 0) return;
    const { blockMs } = this.site;
    await this.connection.block(
      ['XREAD', 'COUNT', '1', 'BLOCK', String(blockMs), 'STREAMS', ...streams, ...from],
      'a blocking XREAD',
      { extraMs: blockMs },
    );
  }

  /** The lease of the partition a shard stream belongs to. */
  #leaseOf(stream: string): string {
    const slot = Number(stream.slice(stream.lastIndexOf('@') + 1));
    return this.site.lease(slot % this.site.count);
  }

  /** Acks an entry while this member holds its partition's lease and the entry is pending for it. */
  async ack(stream: string, id: string): Promise<void> {
    const { token, group, consumer } = this.site;
    const done = await this.commands.script(
      ORDERED_ACK,
      [this.#leaseOf(stream), stream],
      [token, group, consumer, id],
    );
    this.#owner(replyNumber(done), `${stream}/${id}`);
  }

  /** Stores the dead letter and acks the entry, in one script, under the same two conditions. */
  async deadLetter(delivery: Delivery, cause: DeadLetterCause): Promise<void> {
    const { token, group, consumer, keys } = this.site;
    const done = await this.commands.script(
      ORDERED_DEAD_LETTER,
      [this.#leaseOf(delivery.stream), delivery.stream, keys.deadLetters(group)],
      [token, group, consumer, delivery.id, ...deadLetterFields(delivery.envelope, cause, delivery.unread)],
    );
    this.#owner(replyNumber(done), delivery.slot);
  }

  #owner(answer: number, slot: string): void {
    if (answer === 1) return;
    throw new NotOwnerError(
      answer === -1
        ? `settling ${slot}: this member no longer holds its partition's lease`
        : `settling ${slot}: the entry is no longer pending for this member`,
    );
  }
}
