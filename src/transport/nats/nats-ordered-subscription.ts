import type { ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { GateClosedError, OrderingGate } from '../ordered/ordering-gate.js';
import type { Envelope } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { Outcome } from '../../core/outcome.js';
import type { OrderingOptions, Processor, Subscription } from '../transport.js';
import { DeliverySlots } from '../delivery-slots.js';
import { NatsDelivery, type DeliveryContext, type DeliverySource } from './nats-delivery.js';
import type { NatsDriver } from './nats-driver.js';
import { leaseSubject } from './nats-names.js';
import { CountWatch, skippedOutcome } from './nats-count-watch.js';
import type { OrderingRecord } from './nats-partition-count.js';
import { PartitionLease, type LeasePredecessor } from './nats-partition-lease.js';
import { Pause } from '../../core/pause.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** How often a partition behind its take-over fence reads its consumers again. */
const FENCE_CHECK_MS = 100;

/** The shortest pull the client sends. */
const MIN_PULL_MS = 1000;

/** Deliveries a partition hands its owner ahead of the running ones, per unit of `concurrency`. */
export const ORDERED_HELD_PER_SLOT = 16;

/** One partition of an ordered group: its consumer on each topic's stream. */
export interface NatsPartition {
  readonly index: number;
  readonly sources: readonly DeliverySource[];
  /** Creates or checks the partition's consumers again (after a pull failed). */
  readonly ensure: () => Promise<void>;
}

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

/** A partition this member owns: its gate, what the gate holds, its pull loops. */
interface Lane {
  readonly partition: NatsPartition;
  readonly gate: OrderingGate;
  /** Deliveries in the gate by broker id, oldest first (a redelivered copy may join its original). */
  readonly held: Map<string, NatsDelivery[]>;
  /**
   * True until the take-over fence opens: what the pulls bring meanwhile waits in `parked` (and in
   * `held`), unprocessed, until the server counts no copy of the partition as pending to anyone else.
   */
  fenced: boolean;
  readonly parked: NatsDelivery[];
  readonly pulls: Set<ConsumerMessages>;
  loops: Promise<void>[];
  running: boolean;
  /** False once a delivery of this lane could not be settled or handed back (its copy stays pending). */
  clean: boolean;
  stopped: Promise<void> | undefined;
}

/** Read through a function: the loops check it again after every wait. */
const laneRunning = (lane: Lane): boolean => lane.running;

/**
 * One member of an ordered group on JetStream. The group's partitions are durable consumers, each
 * filtered on its slots of every topic; a member consumes a partition only while it holds the
 * partition's lease, so one member at a time takes a partition's messages, in stream order. In the
 * member, each owned partition has an {@link OrderingGate}: one ordering key at a time, retried in
 * place (the copy stays pending, kept alive), never sent to the retry stream. A delivery is settled
 * before the next one of its key starts. A partition whose lease is lost stops at once: what waits
 * in its gate is handed back (or, when the connection is gone, comes back after the ack wait).
 */
export class NatsOrderedSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly #parts: NatsOrderedParts;
  readonly #slots: DeliverySlots;
  readonly #leases: PartitionLease[];
  readonly #lanes = new Map<number, Lane>();
  readonly #watchdogs = new Map<number, NodeJS.Timeout>();
  /** When the write that last renewed each owned partition's lease was sent. */
  readonly #renewedAt = new Map<number, number>();
  #running = true;
  #owner: Promise<void> | undefined;
  readonly #pause = new Pause();
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
    this.#countWatch = new CountWatch(group, parts.count, parts.drainsTo, parts.ctx.settings.logger);
    const { settings } = parts.ctx;
    this.#leases = parts.partitions.map(
      (partition) =>
        new PartitionLease(
          { ...parts, settings },
          leaseSubject(settings, group, partition.index, parts.count),
        ),
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

  /** Read through a method: the loops check it again after every wait. */
  #isRunning(): boolean {
    return this.#running;
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
    this.#owner = this.#ownLoop();
    // A drain's old count may have no consumer left (deleted once drained): then nothing is held.
    const every = this.#parts.partitions.flatMap((p) => p.sources.map((s) => s.keepAliveEveryMs));
    const everyMs = every.length === 0 ? 1000 : Math.max(1, Math.min(...every));
    // Deliveries waiting behind their key keep their ack wait from running out.
    this.#keepAlive = setInterval(() => this.#keepHeldAlive(), everyMs);
  }

  /** Takes free partitions and renews the owned ones, every third of the lease, each on its own. */
  async #ownLoop(): Promise<void> {
    const { settings } = this.#parts.ctx;
    const everyMs = Math.max(100, Math.floor(settings.partitionLeaseMs / 3));
    while (this.#running) {
      // Counted from before the read: a drain recorded after it is unknown to the pulls it allows.
      const readAt = Date.now();
      try {
        if (!this.#countWatch.follow(await this.#parts.record())) {
          void this.close();
          return;
        }
        this.#recordReadAt = readAt;
      } catch (error) {
        settings.logger.warn('oncemq: the partition count of a NATS ordered group could not be read', {
          group: this.group,
          error: errorText(error),
        });
      }
      await Promise.all(
        this.#leases.map(async (lease, index) => {
          try {
            await this.#tend(index, lease);
          } catch (error) {
            settings.logger.warn('oncemq: a NATS partition lease could not be read or written', {
              group: this.group,
              partition: index,
              error: errorText(error),
            });
          }
        }),
      );
      await this.#pause.for(everyMs);
    }
  }

  async #tend(index: number, lease: PartitionLease): Promise<void> {
    // Counted from before the write (the server dates the entry no earlier) and from before the last
    // read of the count record: a pull this allows ends two thirds of a lease after both.
    const sentAt = Math.min(Date.now(), this.#recordReadAt ?? Number.NEGATIVE_INFINITY);
    if (!Number.isFinite(sentAt)) return;
    if (lease.holds()) {
      if (await lease.renew()) this.#watch(index, sentAt);
      else this.#stopLane(index, 'its lease went to another member');
      return;
    }
    if (this.#lanes.has(index)) return;
    const predecessor = await lease.acquire();
    if (predecessor === null) return;
    const partition = this.#parts.partitions[index];
    if (partition === undefined) return;
    if (!this.#isRunning()) {
      await lease.release(true);
      return;
    }
    this.#startLane(partition, predecessor);
    this.#watch(index, sentAt);
  }

  /**
   * Stops the partition two thirds of a lease after the write that last renewed it, unless a renewal
   * comes first: the member lets go well before the server drops its entry and another member may
   * take the partition, however slow its own requests are.
   */
  #watch(index: number, renewedAt: number): void {
    clearTimeout(this.#watchdogs.get(index));
    this.#renewedAt.set(index, renewedAt);
    const leftMs = this.#letGoAt(renewedAt) - Date.now();
    this.#watchdogs.set(
      index,
      setTimeout(() => this.#stopLane(index, 'its lease was not renewed in time'), Math.max(0, leftMs)),
    );
  }

  /**
   * How long a pull started now may stay open at the server: it must end before the watchdog stops
   * the partition, so that no pull of this member is left open when another member may take it.
   */
  #pullRoomMs(index: number): number {
    const renewedAt = this.#renewedAt.get(index);
    if (renewedAt === undefined) return 0;
    return Math.min(
      this.#parts.ctx.settings.pullExpiresMs,
      Math.floor(this.#letGoAt(renewedAt) - Date.now()),
    );
  }

  /** When this member lets a partition go unless it renews the lease again: two thirds of a lease after `renewedAt`. */
  #letGoAt(renewedAt: number): number {
    return renewedAt + (this.#parts.ctx.settings.partitionLeaseMs * 2) / 3;
  }

  /**
   * The take-over fence. Whatever the lease says about the previous owner, the server's consumer
   * state decides: first every pull request still open on the partition's consumers must be gone
   * (one of the previous owner's could be handed later messages of a key); then the new owner
   * processes nothing until the server counts no copy as pending to anyone but this lane. While
   * copies are pending elsewhere, it waits one ack wait before it pulls: a vanished owner's copies
   * are then due again and come first; a slow owner's are settled by it, or handed back.
   */
  async #fence(lane: Lane): Promise<void> {
    const { partition } = lane;
    const { logger } = this.#parts.ctx.settings;
    let told = false;
    for (;;) {
      if (!laneRunning(lane)) return;
      const infos = await Promise.all(
        partition.sources.map((source) => this.#parts.jsm.consumers.info(source.stream, source.consumer)),
      );
      const waiting = infos.reduce((sum, info) => sum + info.num_waiting, 0);
      if (waiting === 0) break;
      if (!told) {
        told = true;
        logger.info('oncemq: a NATS partition taken over with pulls still open; waiting for them to end', {
          group: this.group,
          partition: partition.index,
          waiting,
        });
      }
      await sleep(FENCE_CHECK_MS);
    }
    if (await this.#onlyOurs(lane)) {
      this.#openFence(lane);
      return;
    }
    logger.info(
      'oncemq: a NATS partition taken over with copies pending to another owner; waiting for them',
      { group: this.group, partition: partition.index, waitMs: this.#parts.ackWaitMs },
    );
    const until = Date.now() + this.#parts.ackWaitMs + 1000;
    while (laneRunning(lane) && Date.now() < until) await sleep(Math.min(FENCE_CHECK_MS, until - Date.now()));
  }

  /** Checks the fence until it opens; the pulls run meanwhile and park what they bring. */
  async #watchFence(lane: Lane): Promise<void> {
    while (laneRunning(lane) && lane.fenced) {
      if (await this.#onlyOurs(lane)) this.#openFence(lane);
      else await sleep(FENCE_CHECK_MS);
    }
  }

  /**
   * True when the server counts as pending exactly the copies parked in this lane. Each source's own
   * count is taken before its request: a copy received before the request was delivered before the
   * server's answer, so the answer counts every parked copy, and an equal count leaves none for
   * anyone else (a copy on its way to us only makes the server's count larger).
   */
  async #onlyOurs(lane: Lane): Promise<boolean> {
    for (const source of lane.partition.sources) {
      // Distinct messages: a copy delivered again joins its first one.
      const ours = new Set(
        lane.parked.filter((d) => d.msg.info.stream === source.stream).map((d) => d.msg.seq),
      ).size;
      const info = await this.#parts.jsm.consumers.info(source.stream, source.consumer);
      if (info.num_ack_pending !== ours) return false;
    }
    return true;
  }

  /** Every copy the server delivered earlier is settled or parked here: the parked ones go into the gate, in stream order. */
  #openFence(lane: Lane): void {
    if (!lane.running || !lane.fenced) return;
    lane.fenced = false;
    const parked = lane.parked.splice(0).sort((a, b) => a.msg.seq - b.msg.seq);
    for (const delivery of parked) this.#submit(lane, delivery);
  }

  #startLane(partition: NatsPartition, predecessor: LeasePredecessor): void {
    const held = new Map<string, NatsDelivery[]>();
    const lane: Lane = {
      partition,
      held,
      gate: new OrderingGate(
        { process: (envelope) => this.#processAndSettle(held, envelope) },
        {
          ...this.#parts.ordering,
          concurrency: this.#parts.concurrency,
          logger: this.#parts.ctx.settings.logger,
        },
      ),
      fenced: true,
      parked: [],
      pulls: new Set(),
      loops: [],
      running: true,
      clean: true,
      stopped: undefined,
    };
    this.#lanes.set(partition.index, lane);
    const unreadable = (error: unknown): void => {
      this.#stopLane(partition.index, `its consumers could not be read: ${errorText(error)}`);
    };
    // The lease is renewed meanwhile: the fence holds only the pulls and the processing.
    const ready = this.#fence(lane).catch(unreadable);
    lane.loops = [
      ...partition.sources.map(async (source) => {
        await ready;
        await this.#pullLoop(lane, source);
      }),
      ready.then(() => this.#watchFence(lane)).catch(unreadable),
    ];
    this.#parts.ctx.settings.logger.info('oncemq: consuming a NATS partition', {
      group: this.group,
      partition: partition.index,
      predecessor,
    });
  }

  async #pullLoop(lane: Lane, source: DeliverySource): Promise<void> {
    const { ctx, js, concurrency } = this.#parts;
    const limit = concurrency * ORDERED_HELD_PER_SLOT;
    while (lane.running) {
      await ctx.session.whenConnected();
      if (!laneRunning(lane) || ctx.connection.isClosed()) break;
      const room = limit - lane.gate.pending - lane.parked.length;
      // Behind the fence a full lane still pulls one at a time: a copy it waits for may be next.
      if (room <= 0 && !lane.fenced) {
        await sleep(20);
        continue;
      }
      try {
        const consumer = await js.consumers.get(source.stream, source.consumer);
        // Never a pull that could outlive this member's hold on the partition.
        const expires = this.#pullRoomMs(lane.partition.index);
        if (expires < MIN_PULL_MS) {
          await sleep(20);
          continue;
        }
        const pull = await consumer.fetch({
          max_messages: Math.max(1, Math.min(room, concurrency * 2)),
          expires,
        });
        lane.pulls.add(pull);
        try {
          for await (const msg of pull) this.#receive(lane, source, msg);
        } finally {
          lane.pulls.delete(pull);
        }
      } catch (error) {
        if (!laneRunning(lane)) break;
        ctx.settings.logger.warn(
          'oncemq: a NATS partition pull failed; checking the consumer and pulling again',
          {
            group: this.group,
            stream: source.stream,
            consumer: source.consumer,
            error: errorText(error),
          },
        );
        await lane.partition.ensure().catch(() => undefined);
        await sleep(Math.max(100, ctx.settings.failureBackoffMs));
      }
    }
  }

  #receive(lane: Lane, source: DeliverySource, msg: JsMsg): void {
    const delivery = new NatsDelivery(this.#parts.ctx, source, msg);
    const replayGroup = delivery.replayGroup;
    if ((replayGroup !== undefined && replayGroup !== this.group) || this.#countWatch.beyond(delivery.msg)) {
      void delivery.skip();
      return;
    }
    const { brokerId } = delivery.envelope;
    const list = lane.held.get(brokerId);
    if (list === undefined) lane.held.set(brokerId, [delivery]);
    else list.push(delivery);
    // A pull stopped with the lane may still bring a message: it is held, unprocessed, and handed
    // back with the gate's waiting ones in stream order (handed back at once, it would go first).
    if (!lane.running) return;
    if (lane.fenced) lane.parked.push(delivery);
    else this.#submit(lane, delivery);
  }

  #submit(lane: Lane, delivery: NatsDelivery): void {
    const { brokerId } = delivery.envelope;
    lane.gate.submit(delivery.envelope).then(
      () => this.#forget(lane.held, brokerId),
      (error: unknown) => {
        // A closed gate's delivery stays held: the lane hands it back, in order, when it ends.
        if (error instanceof GateClosedError) return;
        this.#forget(lane.held, brokerId);
        this.#parts.ctx.settings.logger.error('oncemq: an ordered NATS delivery failed', {
          group: this.group,
          brokerId,
          error: errorText(error),
        });
      },
    );
  }

  #forget(held: Map<string, NatsDelivery[]>, brokerId: string): void {
    const list = held.get(brokerId);
    list?.shift();
    if (list?.length === 0) held.delete(brokerId);
  }

  /** One attempt in a member-wide slot; a final outcome is settled before the key's next delivery starts. */
  async #processAndSettle(held: Map<string, NatsDelivery[]>, envelope: Envelope): Promise<Outcome> {
    await this.#slots.acquire(1);
    try {
      const delivery = held.get(envelope.brokerId)?.[0];
      // Taken before this member saw the drain, and after its bound: the new count's consumers run it.
      if (delivery !== undefined && this.#countWatch.beyond(delivery.msg)) {
        await delivery.skip();
        return skippedOutcome(envelope);
      }
      const outcome = await this.#parts.processor.process(envelope);
      if (outcome.action === 'retry') return outcome;
      await held.get(envelope.brokerId)?.[0]?.settle({ outcome });
      return outcome;
    } finally {
      this.#slots.release(1);
    }
  }

  #keepHeldAlive(): void {
    for (const lane of this.#lanes.values()) {
      for (const list of lane.held.values()) {
        for (const delivery of list) void delivery.envelope.keepAlive?.extend().catch(() => undefined);
      }
    }
  }

  /** Stops consuming a partition; its lease is released once what ran is settled. */
  #stopLane(index: number, why: string): void {
    clearTimeout(this.#watchdogs.get(index));
    this.#watchdogs.delete(index);
    this.#renewedAt.delete(index);
    const lane = this.#lanes.get(index);
    if (lane === undefined) return;
    this.#parts.ctx.settings.logger.warn('oncemq: stopped consuming a NATS partition', {
      group: this.group,
      partition: index,
      why,
    });
    void this.#endLane(lane).finally(() => this.#lanes.delete(index));
  }

  /**
   * Stops the pulls, closes the gate (deliveries waiting behind their key or for a retry are handed
   * back, oldest first, so the next owner meets them in order), waits for the running ones to be
   * settled, then releases the lease: `clean` when nothing of ours is left pending at the server.
   */
  #endLane(lane: Lane): Promise<void> {
    lane.stopped ??= (async () => {
      lane.running = false;
      for (const pull of lane.pulls) pull.stop();
      lane.gate.close();
      await Promise.all(lane.loops);
      await lane.gate.drained();
      const waiting = [...lane.held.values()].flat().sort((a, b) => a.msg.seq - b.msg.seq);
      // A copy from a lost connection cannot be handed back: it comes back once its ack wait runs
      // out. Handing back the later ones now would put them first, so then none is handed back.
      if (waiting.some((delivery) => delivery.stale)) lane.clean = false;
      else for (const delivery of waiting) await delivery.giveBack();
      lane.held.clear();
      await this.#leases[lane.partition.index]?.release(lane.clean);
    })();
    return lane.stopped;
  }

  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#running = false;
    this.#pause.wake();
    clearInterval(this.#keepAlive);
    this.#offLoss();
    await this.#owner;
    for (const timer of this.#watchdogs.values()) clearTimeout(timer);
    await Promise.all([...this.#lanes.values()].map((lane) => this.#endLane(lane)));
    this.#lanes.clear();
    this.#slots.close();
    this.onClose();
  }
}
