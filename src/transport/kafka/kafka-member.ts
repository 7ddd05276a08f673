import type { Consumer, ConsumerGroupJoinPayload } from '@platformatic/kafka';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { OrderedLane } from '../ordered/ordered-lane.js';
import { GateClosedError } from '../ordered/ordering-gate.js';
import { KafkaCommits } from './kafka-commits.js';
import { openRecordStream, type RecordStream } from './kafka-driver.js';
import { ORDERED_PENDING_PER_SLOT, type MemberDrain } from './kafka-ordered-subscription.js';
import { dueAt, kafkaEnvelope, readHeaders, type KafkaMessage } from './kafka-record.js';
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
   * Per-key order: each record goes through an ordered lane instead of `settle`;
   * a new lane replaces the old one when the connection is lost.
   */
  readonly ordered?: () => OrderedLane<KafkaMessage>;
  /** A grown topic being drained: what was published before the change runs first. */
  readonly drain?: MemberDrain;
}

/**
 * One Kafka consumer in one Kafka group: fetches, hands records out up to `concurrency` at a time,
 * and commits per partition only the contiguous prefix of finished records, never past one in flight.
 */
export class KafkaMember {
  readonly #init: KafkaMemberInit;
  #stream: RecordStream | undefined;
  readonly #queue: KafkaMessage[] = [];
  /** What this member received, finished and committed, per partition of its assignment. */
  readonly #commits: KafkaCommits;
  #pumpScheduled = false;
  #resetting = false;
  /** Disconnects before this time come from the member closing its own stream's connections. */
  #quietUntil = 0;
  #inFlight = 0;
  #closing = false;
  #dueTimer: NodeJS.Timeout | undefined;
  readonly #running = new Set<Promise<void>>();
  #lane: OrderedLane<KafkaMessage> | undefined;
  readonly #lanes = new Set<OrderedLane<KafkaMessage>>();
  /** While a grown topic drains: records published after the change are left for later. */
  #draining: boolean;

  constructor(init: KafkaMemberInit) {
    this.#init = init;
    this.#commits = new KafkaCommits({
      consumer: init.consumer,
      queue: this.#queue,
      failureBackoffMs: init.failureBackoffMs,
      logger: init.logger,
    });
    this.#draining = init.drain !== undefined;
    this.#lane = this.#newLane();
  }

  #newLane(): OrderedLane<KafkaMessage> | undefined {
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
    this.#commits.forgetAll();
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

  /** A new assignment (see {@link KafkaCommits.assign}): what was kept with a break is forgotten. */
  #onAssignment(payload: ConsumerGroupJoinPayload): void {
    if (!this.#commits.assign(payload)) this.#forgetAll();
    // Records of a partition that went and were not started yet are the new owner's now.
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      if (!this.#commits.holds(this.#queue[i] as KafkaMessage)) this.#queue.splice(i, 1);
    }
    this.#commits.forgetRevoked();
    this.#commits.schedule();
  }

  #receive(message: KafkaMessage): void {
    if (this.#closing) return;
    if (this.#draining && this.#init.drain?.before(message) === false) return;
    if (!this.#commits.receive(message)) return;
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
  #pumpOrdered(lane: OrderedLane<KafkaMessage>): void {
    const limit = this.#init.concurrency * ORDERED_PENDING_PER_SLOT;
    const finish = this.#commits.finisher();
    while (!this.#closing && this.#queue.length > 0) {
      const message = this.#queue.shift() as KafkaMessage;
      const run = lane.run(kafkaEnvelope(message, false), message).then(
        () => finish([message]),
        (error: unknown) => {
          // A closed lane leaves the record unfinished: it is fetched again from the committed offset.
          if (!(error instanceof GateClosedError)) {
            this.#init.logger.error('oncemq: an ordered Kafka record failed', { error: errorText(error) });
          }
        },
      );
      const tracked = run.finally(() => {
        this.#running.delete(tracked);
        if (lane.size < limit) this.#stream?.resume();
      });
      this.#running.add(tracked);
    }
    if (lane.size >= limit) this.#stream?.pause();
    else this.#stream?.resume();
  }

  /** Settles a batch, again after a pause while it fails; then marks it finished and commits. */
  async #run(batch: readonly KafkaMessage[]): Promise<void> {
    const finish = this.#commits.finisher();
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
    finish(batch);
  }

  /** Stops taking records, lets those in flight reach their outcome, commits them, then leaves the group. */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    if (this.#dueTimer !== undefined) clearTimeout(this.#dueTimer);
    this.#commits.close();
    this.#stream?.pause();
    this.#queue.length = 0;
    for (const lane of this.#lanes) lane.close();
    await Promise.all([...this.#running]);
    await this.#commits.commitLast();
    await this.#stream?.close().catch(() => undefined);
    await this.#init.consumer.close().catch(() => undefined);
  }
}
