import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { localEnvelope, LocalSettler, type LocalDelivery } from './local-settler.js';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { Outcome } from '../../core/outcome.js';
import { processAndSettleBatch } from '../settle-batch.js';
import { settle, type DeliveryResult } from '../settler.js';
import type { OrderingOptions, Processor } from '../transport.js';
import { retryTopic } from './local-names.js';
import type { BrokerStore, StoredMessage } from './local-store.js';
import type { DeadLetterStore } from './local-dead-letters.js';
import type { LocalFaultHooks } from './local-fault-hooks.js';
import { allocateQueues, type QueueRef } from './local-queue-allocation.js';
import { QueueCursors, type Cursor } from './local-queue-cursors.js';
import { LocalOrderedSubscription } from './local-ordered-subscription.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Settings of a consumer, resolved by the broker from its config. */
export interface ConsumerSettings {
  readonly pullBatchSize: number;
  /** Deliveries of a pulled batch processed at once when they go one by one. */
  readonly concurrency: number;
  /** Hand pulled batches to the processor's processBatch, when it has one. */
  readonly batches: boolean;
  /** Per-key ordered consumption: deliveries go through an ordering gate, retried in place. */
  readonly ordering: OrderingOptions | undefined;
  readonly pollIntervalMs: number;
  readonly commitIntervalMs: number;
  readonly heartbeatIntervalMs: number;
  readonly sessionTimeoutMs: number;
  readonly consumeFrom: 'first' | 'last';
}

/** What a consumer needs from its broker. */
export interface ConsumerContext {
  readonly store: BrokerStore;
  readonly deadLetters: DeadLetterStore;
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly faults: LocalFaultHooks | undefined;
  /** In-process membership news: emits the group name when a member joins or leaves. */
  readonly membership: EventEmitter;
  brokerId(commitOffset: number): string;
  queueCount(topic: string): number;
}

/** Wait before redelivering copies whose processing threw (not the message's fault). */
export const FAILURE_BACKOFF_MS = 100;

/** A delivery of one member, with the epoch it was pulled in. */
interface MemberDelivery extends LocalDelivery {
  readonly epoch: number;
}

/** Options of one member. */
export interface MemberOptions {
  /** Prefix of the member id (RocketMQ's instance name); members are ordered by id for allocation. @default host:pid */
  readonly consumerName?: string | undefined;
  /** Leaves after this many batches (the member the `rebalance` fault adds). */
  readonly maxBatches?: number;
  /** Leaves after this long, in milliseconds, even when it found nothing to consume. */
  readonly lifetimeMs?: number;
  /** Called mid-batch when the `rebalance` fault fires: add a member to the group. */
  readonly onRebalanceFault?: () => void;
}

/**
 * One member of a consumer group: heart-beats, takes its share of the queues, pulls batches,
 * drives the processor and acts on each outcome. Acks are in memory (the committable offset of a
 * queue is its lowest unacked offset) and reach the store every commit interval, on rebalance and
 * on close — so a crash replays exactly the uncommitted range.
 */
export class LocalConsumer {
  readonly group: string;
  readonly topics: readonly string[];
  #memberId: string;
  readonly #ctx: ConsumerContext;
  readonly #processor: Processor;
  readonly #options: MemberOptions;
  readonly #queues: QueueCursors;
  #epoch = 0;
  #rebalance = true;
  #running = false;
  #view = '';
  #batches = 0;
  /** Set when the processor or the store failed: wait before delivering the copies again. */
  #backoff = false;
  #loop: Promise<void> | undefined;
  #timers: NodeJS.Timeout[] = [];
  readonly #settler: LocalSettler;
  /** Ordered consumption only: where deliveries wait behind the earlier ones of their key. */
  readonly #ordered: LocalOrderedSubscription<MemberDelivery> | undefined;
  readonly #onMembership = (group: string): void => {
    if (group === this.group) this.#rebalance = true;
  };
  /** Deliveries handed to the processor. */
  deliveries = 0;

  constructor(
    ctx: ConsumerContext,
    group: string,
    topics: readonly string[],
    processor: Processor,
    options: MemberOptions = {},
  ) {
    this.#ctx = ctx;
    this.group = group;
    this.topics = topics;
    this.#processor = processor;
    this.#options = options;
    this.#memberId = this.#newMemberId();
    this.#queues = new QueueCursors(ctx.store, group);
    this.#settler = new LocalSettler(ctx, group, () => {
      this.#backoff = true;
    });
    const { ordering } = ctx.settings;
    this.#ordered =
      ordering === undefined
        ? undefined
        : new LocalOrderedSubscription<MemberDelivery>(
            { ...ctx.settings, ordering, logger: ctx.logger },
            processor,
            (delivery, result) => {
              if (this.#settle(delivery, result)) this.crash();
            },
          );
  }

  #newMemberId(): string {
    return `${this.#options.consumerName ?? `${hostname()}:${process.pid}`}@${randomUUID()}`;
  }

  get memberId(): string {
    return this.#memberId;
  }

  get running(): boolean {
    return this.#running;
  }

  /** Queues this member holds now. */
  get assignment(): QueueRef[] {
    return this.#queues.refs();
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    const { store, settings } = this.#ctx;
    store.heartbeat(this.group, this.#memberId);
    this.#ctx.membership.on('change', this.#onMembership);
    this.#ctx.membership.emit('change', this.group);
    const every = (ms: number, fn: () => void): void => {
      const timer = setInterval(() => {
        try {
          fn();
        } catch (error) {
          this.#ctx.logger.warn('oncemq: local consumer timer failed', { error: errorText(error) });
        }
      }, ms);
      timer.unref();
      this.#timers.push(timer);
    };
    every(settings.heartbeatIntervalMs, () => {
      store.heartbeat(this.group, this.#memberId);
      const view = store.liveMembers(this.group, settings.sessionTimeoutMs).join(',');
      if (view !== this.#view) this.#rebalance = true;
    });
    every(settings.commitIntervalMs, () => {
      this.commit();
    });
    this.#loop = this.#run();
  }

  /** Persists the committable offset of every held queue now. */
  commit(): void {
    this.#queues.commit();
  }

  /** Stops pulling, lets the delivery in progress end, commits, leaves the group. */
  async close(): Promise<void> {
    this.#running = false;
    await this.#loop;
  }

  /** The member dies before committing its offsets and rejoins under a new id (crash-after-commit). */
  crash(): void {
    this.#epoch++;
    this.#queues.clear();
    this.#ctx.store.leave(this.group, this.#memberId);
    this.#memberId = this.#newMemberId();
    this.#ctx.store.heartbeat(this.group, this.#memberId);
    this.#ctx.logger.info('oncemq: local consumer crashed after commit and rejoined', { group: this.group });
    this.#ctx.membership.emit('change', this.group);
  }

  async #run(): Promise<void> {
    const { store, settings, logger } = this.#ctx;
    let lastPromote = 0;
    const started = Date.now();
    try {
      while (this.#running) {
        if (this.#options.lifetimeMs !== undefined && Date.now() - started > this.#options.lifetimeMs) break;
        try {
          if (this.#rebalance) this.#doRebalance();
          if (Date.now() - lastPromote >= settings.pollIntervalMs) {
            lastPromote = Date.now();
            store.retries.promoteDue(this.group);
          }
          let worked = false;
          for (const cursor of this.#queues.list()) {
            if (!this.#running || this.#rebalance) break;
            if (!this.#queues.holds(cursor)) continue;
            const batch = this.#queues.take(cursor, this.#ctx.settings.pullBatchSize);
            if (batch.length === 0) continue;
            worked = true;
            if (this.#ordered === undefined) await this.#consume(cursor, batch);
            else await this.#dispatchOrdered(this.#ordered, cursor, batch);
            this.#batches++;
            if (this.#backoff) {
              this.#backoff = false;
              await sleep(Math.max(settings.pollIntervalMs, FAILURE_BACKOFF_MS));
            }
            if (this.#options.maxBatches !== undefined && this.#batches >= this.#options.maxBatches) {
              this.#running = false;
            }
          }
          if (!worked && this.#running) await sleep(settings.pollIntervalMs);
        } catch (error) {
          logger.error('oncemq: local consumer loop failed; retrying', {
            group: this.group,
            error: errorText(error),
          });
          await sleep(settings.pollIntervalMs);
        }
      }
    } finally {
      // Ordered deliveries waiting for a retry stay unsettled (the next owner gets them); running ones end.
      await this.#ordered?.close();
      this.#stop();
    }
  }

  /** Ordered consumption: the batch goes into the member's lane (see {@link LocalOrderedSubscription}). */
  #dispatchOrdered(
    ordered: LocalOrderedSubscription<MemberDelivery>,
    cursor: Cursor,
    batch: readonly StoredMessage[],
  ): Promise<void> {
    const faults = this.#ctx.faults;
    const middle = batch[Math.floor(batch.length / 2)];
    return ordered.submit(
      batch.map((message) => this.#delivery(cursor, message)),
      (delivery) => {
        if (
          delivery.message === middle &&
          this.#options.onRebalanceFault &&
          faults?.rebalance(delivery.envelope)
        ) {
          this.#options.onRebalanceFault();
        }
      },
      () => this.#running,
    );
  }

  #stop(): void {
    for (const timer of this.#timers) clearInterval(timer);
    this.#timers = [];
    this.#ctx.membership.off('change', this.#onMembership);
    try {
      this.commit();
      this.#ctx.store.leave(this.group, this.#memberId);
    } catch (error) {
      this.#ctx.logger.warn('oncemq: could not commit offsets on close', { error: errorText(error) });
    }
    this.#queues.clear();
    this.#ctx.membership.emit('change', this.group);
  }

  #allQueues(): QueueRef[] {
    const queues: QueueRef[] = [];
    for (const topic of [...this.topics, retryTopic(this.group)]) {
      const count = this.#ctx.queueCount(topic);
      for (let queueId = 0; queueId < count; queueId++) queues.push({ topic, queueId });
    }
    return queues;
  }

  #doRebalance(): void {
    const { store, settings } = this.#ctx;
    this.#rebalance = false;
    store.heartbeat(this.group, this.#memberId);
    const members = store.liveMembers(this.group, settings.sessionTimeoutMs);
    this.#view = members.join(',');
    this.#queues.reassign(allocateQueues(this.#allQueues(), members, this.#memberId), settings.consumeFrom);
  }

  async #consume(cursor: Cursor, batch: readonly StoredMessage[]): Promise<void> {
    const epoch = this.#epoch;
    const deliveries = batch.map((message) => this.#delivery(cursor, message));
    const faults = this.#ctx.faults;
    const middle = deliveries[Math.floor(batch.length / 2)];
    if (middle !== undefined && this.#options.onRebalanceFault && faults?.rebalance(middle.envelope)) {
      // A member joins while this batch is in flight: it takes its share from the committed offsets.
      this.#options.onRebalanceFault();
    }
    const processor = this.#processor;
    if (this.#ctx.settings.batches && processor.processBatch !== undefined) {
      const fault = { crash: false };
      await processAndSettleBatch(
        processor.processBatch.bind(processor),
        deliveries.map((delivery) => ({
          envelope: delivery.envelope,
          settle: (result: DeliveryResult) => {
            if (this.#settle(delivery, result)) fault.crash = true;
            return Promise.resolve();
          },
        })),
      );
      if (fault.crash) this.crash();
      return;
    }
    // One by one, up to `concurrency` at a time; each is settled as soon as it has its outcome.
    let next = 0;
    let crashed = false;
    const worker = async (): Promise<void> => {
      while (next < deliveries.length && !crashed) {
        const delivery = deliveries[next++] as MemberDelivery;
        if (!this.#running || epoch !== this.#epoch) return;
        let outcome: Outcome;
        try {
          outcome = await this.#processor.process(delivery.envelope);
        } catch (error) {
          this.#settle(delivery, { error });
          continue;
        }
        if (this.#settle(delivery, { outcome })) {
          crashed = true;
          this.crash();
          return;
        }
      }
    };
    const workers = Math.min(this.#ctx.settings.concurrency, batch.length);
    await Promise.all(Array.from({ length: workers }, worker));
  }

  /** A delivery of this member's current epoch (a crash starts the next: older ones are settled no more). */
  #delivery(cursor: Cursor, message: StoredMessage): MemberDelivery {
    return { cursor, message, envelope: localEnvelope(this.#ctx, message), epoch: this.#epoch };
  }

  /**
   * Settles a delivery of the current epoch through the settler; a store that fails leaves it to come
   * again. Answers whether the `crash-after-commit` fault fires now (an executed outcome was settled).
   */
  #settle(delivery: MemberDelivery, result: DeliveryResult): boolean {
    if (delivery.epoch !== this.#epoch) return false;
    if ('error' in result) {
      this.#settler.fail(delivery, result.error);
      return false;
    }
    this.deliveries++;
    try {
      settle(this.#settler, delivery, result);
    } catch (error) {
      this.#settler.fail(delivery, error);
    }
    return (
      result.outcome.kind === 'executed' && this.#ctx.faults?.crashAfterCommit(delivery.envelope) === true
    );
  }
}
