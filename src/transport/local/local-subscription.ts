import { wholeNumber } from '../config-checks.js';
import type { Processor, SubscribeOptions, Subscription } from '../transport.js';
import type { LocalFaultHooks } from './local-fault-hooks.js';
import { LocalConsumer, type ConsumerContext } from './local-consumer.js';
import type { QueueRef } from './local-queue-allocation.js';

/**
 * Options of {@link LocalBroker.subscribe}: the transport contract's, read the local broker's way.
 * - `concurrency`: deliveries of a pulled batch processed at once when they go one by one. @default 1
 * - `batchSize`: messages pulled from a queue at once and handed to `processBatch` together (1: one by
 *   one through `process`). @default the broker's `pullBatchSize`
 * - `visibility`: not used: a delivery stays with its member until the member leaves or stops
 *   heart-beating, however long its handler runs.
 * - `consumerName`: prefix of the member id (RocketMQ's instance name); members are allocated queues
 *   in id order. @default host:pid
 */
export type LocalSubscribeOptions = SubscribeOptions;

/** The local broker's default concurrency: one SQLite file serializes its writers anyway. */
export const DEFAULT_LOCAL_CONCURRENCY = 1;

/** The consumer context of one subscription: the broker's, with the subscription's own settings. */
export function subscriptionContext(ctx: ConsumerContext, options: LocalSubscribeOptions): ConsumerContext {
  const pullBatchSize = wholeNumber(options.batchSize ?? ctx.settings.pullBatchSize, 'batchSize');
  return {
    ...ctx,
    settings: {
      ...ctx.settings,
      pullBatchSize,
      batches: pullBatchSize > 1,
      ordering: options.ordering,
      concurrency: wholeNumber(options.concurrency ?? DEFAULT_LOCAL_CONCURRENCY, 'concurrency'),
    },
  };
}

/**
 * A subscription to the local broker: one member of the group, plus the short-lived member the
 * `rebalance` fault adds mid-batch (it joins, takes its share from the committed offsets, consumes
 * one batch and leaves — two rebalances, and a replay of the uncommitted range).
 */
export class LocalSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly #member: LocalConsumer;
  readonly #ctx: ConsumerContext;
  readonly #processor: Processor;
  #visitor: LocalConsumer | undefined;
  #closed = false;
  #onClose: (() => void) | undefined;

  /** @internal made by the broker's `subscribe()` */
  constructor(
    ctx: ConsumerContext,
    group: string,
    topics: readonly string[],
    processor: Processor,
    options: LocalSubscribeOptions = {},
  ) {
    this.#ctx = ctx;
    this.group = group;
    this.topics = topics;
    this.#processor = processor;
    this.#member = new LocalConsumer(ctx, group, topics, processor, {
      consumerName: options.consumerName,
      onRebalanceFault: () => {
        this.#addVisitor();
      },
    });
  }

  /** @internal called by the broker to forget a closed subscription */
  set onClose(fn: () => void) {
    this.#onClose = fn;
  }

  /** @internal started by the broker's `subscribe()` */
  start(): void {
    this.#member.start();
  }

  /** This member's id in the group: its consumer name and a random suffix, new at each join. */
  get memberId(): string {
    return this.#member.memberId;
  }

  /** Queues this member holds now. */
  get assignment(): QueueRef[] {
    return this.#member.assignment;
  }

  /** Deliveries handed to the processor by this subscription's members. */
  get deliveries(): number {
    return this.#member.deliveries + (this.#visitor?.deliveries ?? 0);
  }

  /** Persists the offsets processed so far now, instead of at the next commit interval. */
  commit(): void {
    this.#member.commit();
    if (this.#visitor?.running === true) this.#visitor.commit();
  }

  /** Simulates a crash after commit: in-memory offsets are dropped and the member rejoins. */
  crash(): void {
    this.#member.crash();
  }

  #addVisitor(): void {
    if (this.#closed || this.#visitor?.running === true) return;
    const faults = this.#ctx.faults;
    const calm: LocalFaultHooks | undefined =
      faults === undefined
        ? undefined
        : {
            producerAckLost: (message) => faults.producerAckLost(message),
            consumerAckLost: (envelope) => faults.consumerAckLost(envelope),
            crashAfterCommit: () => false,
            rebalance: () => false,
          };
    const visitor = new LocalConsumer(
      { ...this.#ctx, faults: calm },
      this.group,
      this.topics,
      this.#processor,
      {
        maxBatches: 1,
        lifetimeMs: this.#ctx.settings.heartbeatIntervalMs * 2,
      },
    );
    this.#visitor = visitor;
    this.#ctx.logger.info('oncemq: a member joins the group mid-batch (rebalance fault)', {
      group: this.group,
    });
    visitor.start();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([this.#member.close(), this.#visitor?.close()]);
    this.#onClose?.();
  }
}
