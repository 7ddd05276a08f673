import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Envelope } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { Outcome } from '../../core/outcome.js';
import { settleBeforeAnswer, type OrderedLane } from '../ordered/ordered-lane.js';
import { PartitionLeases } from '../ordered/partition-leases.js';
import type { OrderingOptions, Processor, Subscription } from '../transport.js';
import { DeliverySlots } from '../delivery-slots.js';
import { NatsDelivery, type DeliveryContext, type DeliverySource } from './nats-delivery.js';
import type { NatsDriver } from './nats-driver.js';
import { leaseSubject } from './nats-names.js';
import { CountWatch, skippedOutcome } from './nats-count-watch.js';
import { NatsOrderedLane, type NatsPartition } from './nats-ordered-lane.js';
import type { OrderingRecord } from './nats-partition-count.js';
import { NatsLeaseStore, PartitionLease, type LeasePredecessor } from './nats-partition-lease.js';
import { NatsPull, type PulledMessage } from './nats-pull.js';
import { setTimeout as sleep } from 'node:timers/promises';

export type { NatsPartition } from './nats-ordered-lane.js';

/** The shortest pull the client sends. */
const MIN_PULL_MS = 1000;

/** Deliveries a partition hands its owner ahead of the running ones, per unit of `concurrency`. */
export const ORDERED_HELD_PER_SLOT = 16;

/** What an ordered member is made of; the transport builds it once the topology is in place. */
export interface NatsOrderedParts {
  readonly ctx: DeliveryContext;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly driver: NatsDriver;
  readonly partitions: readonly NatsPartition[];
  /** The partition count, part of each lease's subject. */
  readonly count: number;
  readonly processor: Processor;
  readonly concurrency: number;
  readonly ackWaitMs: number;
  readonly ordering: OrderingOptions;
  /** Reads the group's count record (read every third of a lease: a drain is seen within one). */
  readonly record: () => Promise<OrderingRecord | null>;
  /** Set on a drain's old count in a member on the new one: its end is expected, not a failure. */
  readonly drainsTo?: number;
}

/**
 * One member of an ordered group on JetStream. The group's partitions are durable consumers, each
 * filtered on its slots of every topic; a member consumes a partition only while it holds the
 * partition's lease ({@link PartitionLeases} over the lease stream), so one member at a time takes a
 * partition's messages, in stream order, through the same pull requests as an unordered member
 * ({@link NatsPull}). In the member, each owned partition has an ordered lane: one ordering key at a
 * time, retried in place (the copy stays pending, kept alive), never sent to the retry stream. A
 * delivery is settled before the next one of its key starts. A partition whose lease is lost stops at
 * once: what waits in its gate is handed back (or, when the connection is gone, comes back after the
 * ack wait).
 */
export class NatsOrderedSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly #parts: NatsOrderedParts;
  readonly #slots: DeliverySlots;
  readonly #leases: PartitionLeases<LeasePredecessor>;
  readonly #lanes = new Map<number, NatsOrderedLane>();
  #owner: Promise<void> | undefined;
  #keepAlive: NodeJS.Timeout | undefined;
  #offLoss: () => void = () => undefined;
  #closed: Promise<void> | undefined;
  /** When the last read of the group's count record that succeeded was sent; nothing is pulled on an older one. */
  #recordReadAt: number | undefined;
  /** The group's count record as this member follows it: a drain's bounds, or why the member stopped. */
  readonly #countWatch: CountWatch;
  /** Called once closed (the transport forgets it). */
  onClose: () => void = () => undefined;

  constructor(group: string, topics: readonly string[], parts: NatsOrderedParts) {
    this.group = group;
    this.topics = Object.freeze([...topics]);
    this.#parts = parts;
    this.#slots = new DeliverySlots(parts.concurrency);
    const { settings } = parts.ctx;
    this.#countWatch = new CountWatch(group, parts.count, parts.drainsTo, settings.logger);
    const leases = parts.partitions.map(
      (partition) =>
        new PartitionLease(
          { ...parts, settings },
          leaseSubject(settings, group, partition.index, parts.count),
        ),
    );
    const store = new NatsLeaseStore(leases, {
      ready: () => this.#recordReadAt !== undefined,
      stopping: (index) => this.#lanes.has(index),
      warn: (index, error) =>
        settings.logger.warn('oncemq: a NATS partition lease could not be read or written', {
          group,
          partition: index,
          error: errorText(error),
        }),
    });
    this.#leases = new PartitionLeases(
      store,
      {
        taken: (index, predecessor) => this.#startLane(index, predecessor),
        lost: (index, why) => this.#stopLane(index, why),
      },
      {
        count: parts.partitions.length,
        leaseMs: settings.partitionLeaseMs,
        logger: settings.logger,
        group,
        beforeRound: () => this.#readRecord(),
      },
    );
  }

  /** Why the member stopped by itself: the group moved to another partition count. */
  get failure(): Error | undefined {
    return this.#countWatch.failure;
  }

  /** Partitions this member owns now. */
  get owned(): readonly number[] {
    return [...this.#lanes.keys()].sort((a, b) => a - b);
  }

  start(): void {
    // Messages on their way when the connection is lost stay pending at the server until their ack
    // wait runs out, and the gate never saw them: every partition stops, and is taken again as from
    // a vanished owner (it waits for those copies before it pulls).
    this.#offLoss = this.#parts.ctx.session.onLoss(() => {
      for (const [index, lane] of this.#lanes) {
        lane.clean = false;
        this.#stopLane(index, 'the connection was lost');
      }
    });
    this.#owner = this.#leases.start();
    // A drain's old count may have no consumer left (deleted once drained): then nothing is held.
    const every = this.#parts.partitions.flatMap((p) => p.sources.map((s) => s.keepAliveEveryMs));
    const everyMs = every.length === 0 ? 1000 : Math.max(1, Math.min(...every));
    // Deliveries waiting behind their key keep their ack wait from running out.
    this.#keepAlive = setInterval(() => this.#keepHeldAlive(), everyMs);
  }

  /**
   * Reads the group's count record before each round of leases. The round's writes count from before
   * this read (a drain recorded after it is unknown to the pulls it allows): a pull the round allows
   * ends two thirds of a lease after both. Nothing is taken before a first read succeeds.
   */
  async #readRecord(): Promise<{ readonly go: boolean; readonly since?: number }> {
    const readAt = Date.now();
    try {
      if (!this.#countWatch.follow(await this.#parts.record())) {
        void this.close();
        return { go: false };
      }
      this.#recordReadAt = readAt;
    } catch (error) {
      this.#parts.ctx.settings.logger.warn(
        'oncemq: the partition count of a NATS ordered group could not be read',
        { group: this.group, error: errorText(error) },
      );
    }
    return { go: true, ...(this.#recordReadAt === undefined ? {} : { since: this.#recordReadAt }) };
  }

  /**
   * How long a pull started now may stay open at the server: it must end before the leases let the
   * partition go, so that no pull of this member is left open when another member may take it.
   */
  #pullRoomMs(index: number): number {
    const letGoAt = this.#leases.letGoAt(index);
    if (letGoAt === undefined) return 0;
    return Math.min(this.#parts.ctx.settings.pullExpiresMs, Math.floor(letGoAt - Date.now()));
  }

  #startLane(index: number, predecessor: LeasePredecessor): void {
    const partition = this.#parts.partitions[index];
    if (partition === undefined) return;
    const { logger } = this.#parts.ctx.settings;
    const lane = new NatsOrderedLane(
      {
        group: this.group,
        partition,
        jsm: this.#parts.jsm,
        ackWaitMs: this.#parts.ackWaitMs,
        logger,
        onError: (brokerId, error) =>
          logger.error('oncemq: an ordered NATS delivery failed', {
            group: this.group,
            brokerId,
            error: errorText(error),
          }),
      },
      {
        ordering: this.#parts.ordering,
        concurrency: this.#parts.concurrency,
        logger,
        attempt: (ordered, envelope) => this.#attempt(ordered, envelope),
      },
    );
    this.#lanes.set(index, lane);
    const unreadable = (error: unknown): void => {
      this.#stopLane(index, `its consumers could not be read: ${errorText(error)}`);
    };
    // The lease is renewed meanwhile: the fence holds only the pulls and the processing.
    const ready = lane.fence().catch(unreadable);
    lane.loops = [
      ...partition.sources.map(async (source) => {
        await ready;
        await this.#pullLoop(lane, source);
      }),
      ready.then(() => lane.watchFence()).catch(unreadable),
    ];
    logger.info('oncemq: consuming a NATS partition', { group: this.group, partition: index, predecessor });
  }

  /**
   * Pulls one source of a lane on one pull per session, one request at a time, each for what the lane
   * has room for and never open longer than the member's hold on the partition; a failed pull checks
   * the consumer, then pulls again.
   */
  async #pullLoop(lane: NatsOrderedLane, source: DeliverySource): Promise<void> {
    const { ctx, concurrency } = this.#parts;
    const { settings } = ctx;
    const limit = concurrency * ORDERED_HELD_PER_SLOT;
    while (lane.isRunning()) {
      await ctx.session.whenConnected();
      if (!lane.isRunning() || ctx.connection.isClosed()) break;
      const pull = new NatsPull(
        ctx.connection,
        source,
        { expiresMs: settings.pullExpiresMs, idle: false },
        { message: (msg) => this.#receive(lane, source, msg), unfilled: () => undefined },
      );
      lane.pulls.add(pull);
      while (pull.isRunning() && lane.isRunning()) {
        if (pull.outstanding > 0) {
          await pull.changed();
          continue;
        }
        const room = lane.room(limit);
        // Never a pull that could outlive this member's hold on the partition.
        const expires = this.#pullRoomMs(lane.partition.index);
        // Behind the fence a full lane still pulls one at a time: a copy it waits for may be next.
        if ((room <= 0 && !lane.fenced) || expires < MIN_PULL_MS) await sleep(20);
        else pull.request(Math.max(1, Math.min(room, concurrency * 2)), expires);
      }
      pull.stop();
      lane.pulls.delete(pull);
      if (pull.failure === undefined || !lane.isRunning()) continue;
      settings.logger.warn('oncemq: a NATS partition pull failed; checking the consumer and pulling again', {
        group: this.group,
        stream: source.stream,
        consumer: source.consumer,
        error: errorText(pull.failure),
      });
      await lane.partition.ensure().catch(() => undefined);
      await sleep(Math.max(100, settings.failureBackoffMs));
    }
  }

  #receive(lane: NatsOrderedLane, source: DeliverySource, msg: PulledMessage): void {
    const delivery = new NatsDelivery(this.#parts.ctx, source, msg);
    const replayGroup = delivery.replayGroup;
    if ((replayGroup !== undefined && replayGroup !== this.group) || this.#countWatch.beyond(delivery.msg)) {
      void delivery.skip();
      return;
    }
    lane.take(delivery);
  }

  /** One attempt in a member-wide slot; a final outcome is settled before the key's next delivery starts. */
  async #attempt(lane: OrderedLane<NatsDelivery>, envelope: Envelope): Promise<Outcome> {
    await this.#slots.acquire(1);
    try {
      const delivery = lane.current(envelope.brokerId);
      // Taken before this member saw the drain, and after its bound: the new count's consumers run it.
      if (delivery !== undefined && this.#countWatch.beyond(delivery.msg)) {
        await delivery.skip();
        return skippedOutcome(envelope);
      }
      const outcome = await this.#parts.processor.process(envelope);
      return await settleBeforeAnswer(lane.gate, outcome, lane.current(envelope.brokerId), (held, final) =>
        held.settle({ outcome: final }),
      );
    } finally {
      this.#slots.release(1);
    }
  }

  #keepHeldAlive(): void {
    for (const lane of this.#lanes.values()) {
      for (const delivery of lane.held()) void delivery.envelope.keepAlive?.extend().catch(() => undefined);
    }
  }

  /** Stops consuming a partition; its lease is released once what ran is settled. */
  #stopLane(index: number, why: string): void {
    const lane = this.#lanes.get(index);
    if (lane === undefined) return;
    this.#parts.ctx.settings.logger.warn('oncemq: stopped consuming a NATS partition', {
      group: this.group,
      partition: index,
      why,
    });
    void lane.end((clean) => this.#leases.release(index, clean)).finally(() => this.#lanes.delete(index));
  }

  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    clearInterval(this.#keepAlive);
    this.#offLoss();
    await this.#owner?.catch(() => undefined);
    await this.#leases.stop();
    await Promise.all(
      [...this.#lanes].map(([index, lane]) => lane.end((clean) => this.#leases.release(index, clean))),
    );
    this.#lanes.clear();
    this.#slots.close();
    this.onClose();
  }
}
