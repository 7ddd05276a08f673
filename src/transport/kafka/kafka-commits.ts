import type { Consumer, ConsumerGroupJoinPayload } from '@platformatic/kafka';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { PartitionOffsets } from './kafka-partition-offsets.js';
import type { KafkaMessage } from './kafka-record.js';

/**
 * Least time between the starts of two commits of a member: what finishes meanwhile goes in the next
 * commit. Committing after every finish cost the broker a request (and an append to its offsets log)
 * per one to a few records; a closing member commits at once.
 */
export const COMMIT_INTERVAL_MS = 50;

/** One partition's offset in a commit request. */
interface CommitOffset {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly leaderEpoch: number;
}

/** Who the member was in the group when it last joined. */
interface Membership {
  readonly memberId: string;
  readonly generationId: number | undefined;
}

/** What a member's commits need: its consumer, its queue of records not started, and how to wait. */
export interface KafkaCommitsInit {
  readonly consumer: Pick<Consumer, 'commit'>;
  /** The member's records received and not started (its own array, read as it changes). */
  readonly queue: readonly KafkaMessage[];
  readonly failureBackoffMs: number;
  readonly logger: Logger;
}

/**
 * The offsets of one member in its Kafka group: per partition what it received and finished
 * ({@link PartitionOffsets}), the partitions the group assigns it, and its commits of the finished
 * prefixes — at most one every {@link COMMIT_INTERVAL_MS}, only of partitions it holds without a break.
 */
export class KafkaCommits {
  readonly #init: KafkaCommitsInit;
  /** Offsets per partition; replaced when the member forgets all (records in flight then count for nothing). */
  #partitions = new Map<string, PartitionOffsets>();
  /** `topic\0partition` per topic and partition, made once: one is looked up for every record read and finished. */
  readonly #partitionKeys = new Map<string, string[]>();
  /** Partitions the group currently assigns this member (`undefined` until the first assignment). */
  #assigned: Set<string> | undefined;
  /** The member id and generation of the last assignment. */
  #membership: Membership | undefined;
  /** The offsets of the commit request out (the client may send it again after rejoining). */
  #sending: CommitOffset[] | undefined;
  #closing = false;
  #committing: Promise<void> | undefined;
  #commitAgain = false;
  /** Set while a commit waits for `COMMIT_INTERVAL_MS` since the last one started. */
  #commitTimer: NodeJS.Timeout | undefined;
  #lastCommitAt = 0;

  constructor(init: KafkaCommitsInit) {
    this.#init = init;
  }

  #partitionKey(topic: string, partition: number): string {
    let keys = this.#partitionKeys.get(topic);
    if (keys === undefined) {
      keys = [];
      this.#partitionKeys.set(topic, keys);
    }
    return (keys[partition] ??= `${topic}\u0000${partition}`);
  }

  /**
   * Notes a record read, and answers false for one received already: after a rejoin the stream
   * fetches again from the committed offset, and the records already here are skipped.
   */
  receive(message: KafkaMessage): boolean {
    const key = this.#partitionKey(message.topic, message.partition);
    let offsets = this.#partitions.get(key);
    if (offsets === undefined) {
      offsets = new PartitionOffsets();
      this.#partitions.set(key, offsets);
    }
    if (offsets.seen(message.offset)) return false;
    offsets.receive(message.offset);
    return true;
  }

  /**
   * Answers how to mark records finished (their outcomes settled) and commit: into the offsets kept
   * now. Records in flight when the member forgets all finish into the forgotten offsets, never committed.
   */
  finisher(): (messages: readonly KafkaMessage[]) => void {
    const partitions = this.#partitions;
    return (messages) => {
      for (const message of messages) {
        partitions.get(this.#partitionKey(message.topic, message.partition))?.finish(message.offset);
      }
      this.schedule();
    };
  }

  /** Forgets every partition's offsets: what the member received comes again from the committed offsets. */
  forgetAll(): void {
    this.#partitions = new Map();
  }

  /**
   * A new assignment; answers whether the offsets kept are still valid. They are only if the member
   * held its partitions without a break: the same member id, in the generation right after the last
   * one. A member that missed a generation (its session ran out while it was paused, and it joined
   * again) may get a partition back that another member read and committed past meanwhile. The client
   * sends a commit refused for a stale generation again after rejoining, with the same offsets and the
   * new generation, which Kafka takes from any member for any partition: the commit out keeps only the
   * partitions held without a break.
   */
  assign(payload: ConsumerGroupJoinPayload): boolean {
    const assigned = new Set<string>();
    for (const assignment of payload.assignments ?? []) {
      for (const partition of assignment.partitions)
        assigned.add(this.#partitionKey(assignment.topic, partition));
    }
    const previous = this.#membership;
    this.#membership = { memberId: payload.memberId, generationId: payload.generationId };
    const unbroken =
      previous !== undefined &&
      previous.memberId === payload.memberId &&
      previous.generationId !== undefined &&
      payload.generationId === previous.generationId + 1;
    const sending = this.#sending;
    if (sending !== undefined) {
      const kept = unbroken
        ? sending.filter(({ topic, partition }) => assigned.has(this.#partitionKey(topic, partition)))
        : [];
      sending.splice(0, sending.length, ...kept);
    }
    this.#assigned = assigned;
    return previous === undefined || unbroken;
  }

  /** Whether the group assigns the record's partition to this member (true before the first assignment). */
  holds(message: KafkaMessage): boolean {
    return this.#assigned?.has(this.#partitionKey(message.topic, message.partition)) ?? true;
  }

  /**
   * Forgets partitions that went once nothing of them is in flight. Their finished prefix is not
   * committed: the new owner may already have committed past it, and Kafka takes any commit of a
   * current member, so a late commit from here would move the group's offset back.
   */
  forgetRevoked(): void {
    if (this.#assigned === undefined) return;
    for (const [key, offsets] of this.#partitions) {
      if (!this.#assigned.has(key) && offsets.unfinished === this.#queuedOf(key))
        this.#partitions.delete(key);
    }
  }

  #queuedOf(key: string): number {
    return this.#init.queue.filter((message) => this.#partitionKey(message.topic, message.partition) === key)
      .length;
  }

  /** Commits the finished prefixes, at most once every {@link COMMIT_INTERVAL_MS}. */
  schedule(): void {
    // Closing commits once, after every record in flight finished: a commit per finish would be a burst.
    if (this.#closing) return;
    if (this.#committing !== undefined) {
      this.#commitAgain = true;
      return;
    }
    if (this.#commitTimer !== undefined) return;
    const wait = this.#lastCommitAt + COMMIT_INTERVAL_MS - Date.now();
    if (wait > 0) {
      this.#commitTimer = setTimeout(() => {
        this.#commitTimer = undefined;
        this.schedule();
      }, wait);
      this.#commitTimer.unref();
      return;
    }
    this.#lastCommitAt = Date.now();
    this.#committing = this.#commit().finally(() => {
      this.#committing = undefined;
      if (this.#commitAgain) {
        this.#commitAgain = false;
        this.schedule();
      }
    });
  }

  /** Stops committing as records finish: a closing member commits once, with {@link commitLast}. */
  close(): void {
    this.#closing = true;
    if (this.#commitTimer !== undefined) clearTimeout(this.#commitTimer);
    this.#commitTimer = undefined;
  }

  /** Waits for the commit out, then commits what finished since. */
  async commitLast(): Promise<void> {
    await this.#committing;
    this.#commitAgain = false;
    await this.#commit();
  }

  /** Commits the finished prefix of every partition. A failed commit is tried at the next one. */
  async #commit(): Promise<void> {
    const partitions = this.#partitions;
    const offsets: CommitOffset[] = [];
    const assigned = this.#assigned;
    for (const [key, partition] of partitions) {
      // Only partitions this member owns now (see forgetRevoked).
      if (assigned !== undefined && !assigned.has(key)) continue;
      const offset = partition.committable();
      if (offset === null) continue;
      const [topic, index] = key.split('\u0000') as [string, string];
      offsets.push({ topic, partition: Number(index), offset, leaderEpoch: -1 });
    }
    if (offsets.length === 0) {
      this.forgetRevoked();
      return;
    }
    this.#sending = offsets;
    try {
      // `offsets` is the request's own array, which the client (1.35) reads again when it resends the
      // request after rejoining: a rejoin meanwhile takes out what this member may no longer commit (see
      // assign), and what is left is what was committed. A client that copied it would fail the
      // held-commit test of kafka-pitfalls.
      await this.#init.consumer.commit({ offsets });
      for (const { topic, partition, offset } of offsets) {
        partitions.get(this.#partitionKey(topic, partition))?.committed(offset);
      }
      this.forgetRevoked();
    } catch (error) {
      // Not committed: after a rebalance the new owner gets these records again, and the ledger absorbs them.
      this.#init.logger.warn('oncemq: a Kafka offset commit failed', { error: errorText(error) });
      if (!this.#closing) setTimeout(() => this.schedule(), this.#init.failureBackoffMs).unref();
    } finally {
      this.#sending = undefined;
    }
  }
}
