import type { Consumer, ConsumerGroupJoinPayload } from '@platformatic/kafka';
import { GateClosedError } from '../ordered/ordering-gate.js';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { PartitionOffsets } from './partition-offsets.js';
import { openRecordStream, type RecordStream } from './kafka-client.js';
import { dueAt, readHeaders, type KafkaMessage } from './kafka-record.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** What a member needs: its consumer, what it reads, how many at once, and who settles the records. */
export interface KafkaMemberInit {
  readonly consumer: Consumer;
  readonly topics: readonly string[];
  readonly concurrency: number;
  /** Most records handed to `settle` at once. */
  readonly batchSize: number;
  /** A retry tier: each record waits in order until its due time. */
  readonly delayed: boolean;
  /**
   * Processes records and settles each outcome at the broker (a retry or dead-letter copy confirmed);
   * resolves when all are settled. A rejection leaves them unfinished: they are processed again.
   */
  readonly settle: (messages: readonly KafkaMessage[]) => Promise<void>;
  readonly failureBackoffMs: number;
  /** Most bytes one fetch brings (see `fetchMaxBytes` of the transport). */
  readonly fetchMaxBytes: number;
  readonly logger: Logger;
  /**
   * Per-key order: each record goes through a lane of its own (an ordering gate) instead of `settle`;
   * a new lane replaces the old one when the connection is lost.
   */
  readonly ordered?: () => OrderedLane;
  /** A grown topic being drained: what was published before the change runs first. */
  readonly drain?: MemberDrain;
}

/** The drain of a grown topic, as a member sees it. */
export interface MemberDrain {
  /** Whether a record was published before the change (in an old partition, below its end offset then). */
  before(message: KafkaMessage): boolean;
  /**
   * Resolves once the group committed every old partition up to its end offset (and the new count
   * is recorded); `stop` answers true when the member closes first.
   */
  finished(stop: () => boolean): Promise<void>;
}

/** Runs records one ordering key at a time, each to its final outcome, settled at the broker. */
export interface OrderedLane {
  /** Resolves once the record's final outcome is settled; rejects with `GateClosedError` when the lane closed first. */
  run(message: KafkaMessage): Promise<void>;
  /** Records taken and not finished (queued behind their key, running, waiting to retry). */
  readonly pending: number;
  /** Records waiting leave unfinished; running ones finish. */
  close(): void;
  drained(): Promise<void>;
}

/** Records an ordered member holds at once, per unit of `concurrency`, before it pauses fetching. */
export const ORDERED_PENDING_PER_SLOT = 16;

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

/**
 * One Kafka consumer in one Kafka group: fetches, hands records out up to `concurrency` at a time,
 * and commits per partition only the contiguous prefix of finished records, never past one in flight.
 */
export class KafkaMember {
  readonly #init: KafkaMemberInit;
  #stream: RecordStream | undefined;
  readonly #queue: KafkaMessage[] = [];
  /** Offsets per partition; replaced when the connection is lost (records in flight then count for nothing). */
  #partitions = new Map<string, PartitionOffsets>();
  #pumpScheduled = false;
  #resetting = false;
  /** Disconnects before this time come from the member closing its own stream's connections. */
  #quietUntil = 0;
  /** Partitions the group currently assigns this member (`undefined` until the first assignment). */
  #assigned: Set<string> | undefined;
  /** The member id and generation of the last assignment. */
  #membership: Membership | undefined;
  /** The offsets of the commit request out (the client may send it again after rejoining). */
  #sending: CommitOffset[] | undefined;
  #inFlight = 0;
  #closing = false;
  #dueTimer: NodeJS.Timeout | undefined;
  #committing: Promise<void> | undefined;
  #commitAgain = false;
  /** Set while a commit waits for `COMMIT_INTERVAL_MS` since the last one started. */
  #commitTimer: NodeJS.Timeout | undefined;
  #lastCommitAt = 0;
  readonly #running = new Set<Promise<void>>();
  #lane: OrderedLane | undefined;
  readonly #lanes = new Set<OrderedLane>();
  /** While a grown topic drains: records published after the change are left for later. */
  #draining: boolean;
  /** `topic\0partition` per topic and partition, made once: one is looked up for every record read and finished. */
  readonly #partitionKeys = new Map<string, string[]>();

  constructor(init: KafkaMemberInit) {
    this.#init = init;
    this.#draining = init.drain !== undefined;
    this.#lane = this.#newLane();
  }

  #partitionKey(topic: string, partition: number): string {
    let keys = this.#partitionKeys.get(topic);
    if (keys === undefined) {
      keys = [];
      this.#partitionKeys.set(topic, keys);
    }
    return (keys[partition] ??= `${topic}\u0000${partition}`);
  }

  #newLane(): OrderedLane | undefined {
    const lane = this.#init.ordered?.();
    if (lane !== undefined) this.#lanes.add(lane);
    return lane;
  }

  /** Joins the group and starts reading from the committed offsets (the earliest, for a new group). */
  async start(): Promise<void> {
    const consumer = this.#init.consumer;
    consumer.on('consumer:group:join', (payload) => this.#onAssignment(payload));
    consumer.on('client:broker:disconnect', () => void this.#connectionLost());
    await this.#openStream();
    if (this.#init.drain !== undefined) void this.#afterDrain(this.#init.drain);
  }

  /**
   * Records published after the change were left unread (never received, so never committed); once
   * the whole group has committed the old partitions to their ends, the stream reads again from the
   * committed offsets and takes them, each partition in order.
   */
  async #afterDrain(drain: MemberDrain): Promise<void> {
    await drain.finished(() => this.#closing);
    if (this.#closing) return;
    this.#draining = false;
    this.#init.logger.info('oncemq: a grown Kafka topic was drained; consuming every partition');
    const stream = this.#stream;
    if (stream !== undefined) await this.#reopen(stream);
  }

  /**
   * A lost connection: whether this member still owns its partitions, and whether a commit sent
   * before it arrived, is unknown. Records in flight finish, but their offsets are not committed by
   * this member's old view; the stream reads again from the committed offsets and the same copies
   * come back (the ledger absorbs those whose effect was committed), as a broker redelivers the
   * unacknowledged deliveries of a lost connection.
   */
  async #connectionLost(): Promise<void> {
    if (this.#closing || this.#resetting || Date.now() < this.#quietUntil) return;
    this.#init.logger.warn(
      'oncemq: a Kafka broker connection was lost; reading again from the committed offsets',
    );
    this.#resetting = true;
    try {
      this.#forgetAll();
      const stream = this.#stream;
      if (stream !== undefined) await this.#reopen(stream);
    } finally {
      this.#resetting = false;
    }
  }

  /**
   * Forgets every partition's offsets and the records not started: what this member received comes
   * again from the group's committed offsets. Records in flight finish into the forgotten offsets,
   * which are never committed.
   */
  #forgetAll(): void {
    this.#partitions = new Map();
    this.#queue.length = 0;
    const lane = this.#lane;
    if (lane !== undefined && !this.#closing) {
      // What waits in the old lane comes again from the committed offsets, to the new one.
      lane.close();
      void lane.drained().then(() => this.#lanes.delete(lane));
      this.#lane = this.#newLane();
    }
  }

  async #openStream(): Promise<void> {
    const options = {
      topics: [...this.#init.topics],
      mode: 'committed' as const,
      fallbackMode: 'earliest' as const,
      autocommit: false,
      maxWaitTime: 200,
      maxBytes: this.#init.fetchMaxBytes,
    };
    let failedAtOnce: Error | undefined;
    const stream = await openRecordStream(this.#init.consumer, options, (failed, error) => {
      if (this.#closing) return;
      if (this.#stream !== failed) {
        failedAtOnce = error;
        return;
      }
      this.#init.logger.warn('oncemq: a Kafka message stream failed; opening it again', {
        error: errorText(error),
      });
      void this.#reopen(failed);
    });
    if (this.#closing || failedAtOnce !== undefined) {
      await stream.close().catch(() => undefined);
      if (failedAtOnce !== undefined) throw failedAtOnce;
      return;
    }
    this.#stream = stream;
    stream.on('data', (message: KafkaMessage) => this.#receive(message));
  }

  async #reopen(failed: RecordStream): Promise<void> {
    if (this.#stream !== failed || this.#closing) return;
    this.#stream = undefined;
    this.#quietUntil = Number.POSITIVE_INFINITY;
    await failed.close().catch(() => undefined);
    this.#quietUntil = Date.now() + 1000;
    for (let first = true; !this.#closing; first = false) {
      if (!first) await sleep(this.#init.failureBackoffMs);
      try {
        await this.#openStream();
        return;
      } catch (error) {
        this.#init.logger.warn('oncemq: cannot open a Kafka message stream yet', { error: errorText(error) });
      }
    }
  }

  /**
   * A new assignment. The offsets this member keeps of a partition stay valid only if the member
   * held it without a break: the same member id, in the generation right after the last one. A member
   * that missed a generation (its session ran out while it was paused, and it joined again) may get a
   * partition back that another member read and committed past meanwhile: what it kept is forgotten.
   * The client sends a commit refused for a stale generation again after rejoining, with the same
   * offsets and the new generation, which Kafka takes from any member for any partition: the commit
   * out keeps only the partitions held without a break.
   */
  #onAssignment(payload: ConsumerGroupJoinPayload): void {
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
    if (previous !== undefined && !unbroken) this.#forgetAll();
    const sending = this.#sending;
    if (sending !== undefined) {
      const kept = unbroken
        ? sending.filter(({ topic, partition }) => assigned.has(this.#partitionKey(topic, partition)))
        : [];
      sending.splice(0, sending.length, ...kept);
    }
    this.#assigned = assigned;
    // Records of a partition that went and were not started yet are the new owner's now.
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      const message = this.#queue[i] as KafkaMessage;
      if (!assigned.has(this.#partitionKey(message.topic, message.partition))) this.#queue.splice(i, 1);
    }
    this.#forgetRevoked();
    this.#scheduleCommit();
  }

  /**
   * Forgets partitions that went once nothing of them is in flight. Their finished prefix is not
   * committed: the new owner may already have committed past it, and Kafka takes any commit of a
   * current member, so a late commit from here would move the group's offset back.
   */
  #forgetRevoked(): void {
    if (this.#assigned === undefined) return;
    for (const [key, offsets] of this.#partitions) {
      if (!this.#assigned.has(key) && offsets.unfinished === this.#queuedOf(key))
        this.#partitions.delete(key);
    }
  }

  #queuedOf(key: string): number {
    return this.#queue.filter((message) => this.#partitionKey(message.topic, message.partition) === key)
      .length;
  }

  #receive(message: KafkaMessage): void {
    if (this.#closing) return;
    if (this.#draining && this.#init.drain?.before(message) === false) return;
    const key = this.#partitionKey(message.topic, message.partition);
    let offsets = this.#partitions.get(key);
    if (offsets === undefined) {
      offsets = new PartitionOffsets();
      this.#partitions.set(key, offsets);
    }
    // After a rejoin the stream fetches again from the committed offset: records already here are skipped.
    if (offsets.seen(message.offset)) return;
    offsets.receive(message.offset);
    this.#queue.push(message);
    if (this.#queue.length >= this.#init.concurrency * 2) this.#stream?.pause();
    if (this.#fullBatchFits()) this.#pump();
    else this.#schedulePump();
  }

  /**
   * Whether a full batch is queued and has room to start now. It starts at once, while the client is
   * still reading the rest of the fetch (a fetch can bring thousands of records, read in one go).
   */
  #fullBatchFits(): boolean {
    const { batchSize, concurrency, delayed } = this.#init;
    return (
      !delayed &&
      this.#lane === undefined &&
      this.#queue.length >= batchSize &&
      this.#inFlight + batchSize <= concurrency
    );
  }

  /** Pumps once the records of one fetch are all queued, so that a partial batch can take several. */
  #schedulePump(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    setImmediate(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#lane !== undefined) {
      this.#pumpOrdered(this.#lane);
      return;
    }
    while (!this.#closing && this.#inFlight < this.#init.concurrency && this.#queue.length > 0) {
      if (this.#init.delayed) {
        const wait = dueAt(readHeaders(this.#queue[0] as KafkaMessage)) - Date.now();
        if (wait > 0) {
          if (this.#dueTimer === undefined) {
            this.#dueTimer = setTimeout(() => {
              this.#dueTimer = undefined;
              this.#pump();
            }, wait);
          }
          return;
        }
      }
      const room = Math.min(this.#init.batchSize, this.#init.concurrency - this.#inFlight);
      const batch: KafkaMessage[] = [];
      while (batch.length < room && this.#queue.length > 0) {
        const next = this.#queue[0] as KafkaMessage;
        if (this.#init.delayed && dueAt(readHeaders(next)) > Date.now()) break;
        batch.push(next);
        this.#queue.shift();
      }
      this.#inFlight += batch.length;
      const run = this.#run(batch).finally(() => {
        this.#running.delete(run);
        this.#inFlight -= batch.length;
        if (this.#queue.length < this.#init.concurrency) this.#stream?.resume();
        this.#pump();
      });
      this.#running.add(run);
    }
  }

  /**
   * Hands every queued record to the ordering lane, which runs one key at a time; a record is marked
   * finished (and its partition's finished prefix committed) once its final outcome is settled.
   * Fetching pauses while the lane holds `concurrency × 16` records.
   */
  #pumpOrdered(lane: OrderedLane): void {
    const limit = this.#init.concurrency * ORDERED_PENDING_PER_SLOT;
    const partitions = this.#partitions;
    while (!this.#closing && this.#queue.length > 0) {
      const message = this.#queue.shift() as KafkaMessage;
      const run = lane.run(message).then(
        () => {
          partitions.get(this.#partitionKey(message.topic, message.partition))?.finish(message.offset);
          this.#scheduleCommit();
        },
        (error: unknown) => {
          // A closed lane leaves the record unfinished: it is fetched again from the committed offset.
          if (!(error instanceof GateClosedError)) {
            this.#init.logger.error('oncemq: an ordered Kafka record failed', { error: errorText(error) });
          }
        },
      );
      const tracked = run.finally(() => {
        this.#running.delete(tracked);
        if (lane.pending < limit) this.#stream?.resume();
      });
      this.#running.add(tracked);
    }
    if (lane.pending >= limit) this.#stream?.pause();
    else this.#stream?.resume();
  }

  /** Settles a batch, again after a pause while it fails; then marks it finished and commits. */
  async #run(batch: readonly KafkaMessage[]): Promise<void> {
    const partitions = this.#partitions;
    for (let attempt = 1; ; attempt++) {
      // A batch that keeps failing while the member closes stays unfinished: it comes again later.
      if (attempt > 1 && this.#closing) return;
      try {
        await this.#init.settle(batch);
        break;
      } catch (error) {
        this.#init.logger.warn('oncemq: processing or settling Kafka records failed; trying again', {
          error: errorText(error),
        });
        await sleep(this.#init.failureBackoffMs);
      }
    }
    for (const message of batch) {
      partitions.get(this.#partitionKey(message.topic, message.partition))?.finish(message.offset);
    }
    this.#scheduleCommit();
  }

  #scheduleCommit(): void {
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
        this.#scheduleCommit();
      }, wait);
      this.#commitTimer.unref();
      return;
    }
    this.#lastCommitAt = Date.now();
    this.#committing = this.#commit().finally(() => {
      this.#committing = undefined;
      if (this.#commitAgain) {
        this.#commitAgain = false;
        this.#scheduleCommit();
      }
    });
  }

  /** Commits the finished prefix of every partition. A failed commit is tried at the next one. */
  async #commit(): Promise<void> {
    const partitions = this.#partitions;
    const offsets: CommitOffset[] = [];
    const assigned = this.#assigned;
    for (const [key, partition] of partitions) {
      // Only partitions this member owns now (see #forgetRevoked).
      if (assigned !== undefined && !assigned.has(key)) continue;
      const offset = partition.committable();
      if (offset === null) continue;
      const [topic, index] = key.split('\u0000') as [string, string];
      offsets.push({ topic, partition: Number(index), offset, leaderEpoch: -1 });
    }
    if (offsets.length === 0) {
      this.#forgetRevoked();
      return;
    }
    this.#sending = offsets;
    try {
      // `offsets` is the request's own array, which the client (1.35) reads again when it resends the
      // request after rejoining: a rejoin meanwhile takes out what this member may no longer commit (see
      // #onAssignment), and what is left is what was committed. A client that copied it would fail the
      // held-commit test of kafka-pitfalls.
      await this.#init.consumer.commit({ offsets });
      for (const { topic, partition, offset } of offsets) {
        partitions.get(this.#partitionKey(topic, partition))?.committed(offset);
      }
      this.#forgetRevoked();
    } catch (error) {
      // Not committed: after a rebalance the new owner gets these records again, and the ledger absorbs them.
      this.#init.logger.warn('oncemq: a Kafka offset commit failed', { error: errorText(error) });
      if (!this.#closing) setTimeout(() => this.#scheduleCommit(), this.#init.failureBackoffMs).unref();
    } finally {
      this.#sending = undefined;
    }
  }

  /** Stops taking records, lets those in flight reach their outcome, commits them, then leaves the group. */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    if (this.#dueTimer !== undefined) clearTimeout(this.#dueTimer);
    if (this.#commitTimer !== undefined) clearTimeout(this.#commitTimer);
    this.#commitTimer = undefined;
    this.#stream?.pause();
    this.#queue.length = 0;
    for (const lane of this.#lanes) lane.close();
    await Promise.all([...this.#running]);
    await this.#committing;
    this.#commitAgain = false;
    await this.#commit();
    await this.#stream?.close().catch(() => undefined);
    await this.#init.consumer.close().catch(() => undefined);
  }
}
