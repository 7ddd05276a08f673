import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../../core/logger.js';
import { OrderedLane, type LaneOptions } from '../ordered/ordered-lane.js';
import type { NatsDelivery, DeliverySource } from './nats-delivery.js';
import type { NatsPull } from './nats-pull.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** How often a partition behind its take-over fence reads its consumers again. */
const FENCE_CHECK_MS = 100;

/** One partition of an ordered group: its consumer on each topic's stream. */
export interface NatsPartition {
  readonly index: number;
  readonly sources: readonly DeliverySource[];
  /** Creates or checks the partition's consumers again (after a pull failed). */
  readonly ensure: () => Promise<void>;
}

/** What a lane needs besides its gate's options. */
export interface NatsLaneParts {
  readonly group: string;
  readonly partition: NatsPartition;
  readonly jsm: JetStreamManager;
  /** The consumers' ack wait: how long the fence waits for copies pending to another owner. */
  readonly ackWaitMs: number;
  readonly logger: Logger;
  /** Logs an ordered delivery that failed other than by its gate closing. */
  readonly onError: (brokerId: string, error: unknown) => void;
}

/**
 * A partition this member owns: an {@link OrderedLane} (its gate and the deliveries it holds) with
 * what NATS adds: the take-over fence and the deliveries parked behind it, the partition's pulls, and
 * whether everything of it was settled or handed back (`clean`, told to the next owner).
 */
export class NatsOrderedLane {
  readonly partition: NatsPartition;
  readonly lane: OrderedLane<NatsDelivery>;
  /**
   * True until the take-over fence opens: what the pulls bring meanwhile waits in `parked`,
   * unprocessed, until the server counts no copy of the partition as pending to anyone else.
   */
  fenced = true;
  /** Deliveries behind the fence, and those a pull brought after the lane stopped. */
  readonly parked: NatsDelivery[] = [];
  readonly pulls = new Set<NatsPull>();
  loops: Promise<void>[] = [];
  running = true;
  /** False once a delivery of this lane could not be settled or handed back (its copy stays pending). */
  clean = true;
  #stopped: Promise<void> | undefined;
  readonly #parts: NatsLaneParts;

  constructor(parts: NatsLaneParts, options: LaneOptions<NatsDelivery>) {
    this.#parts = parts;
    this.partition = parts.partition;
    this.lane = new OrderedLane({ ...options, keepUnanswered: true });
  }

  /** Read through a method: the loops check it again after every wait. */
  isRunning(): boolean {
    return this.running;
  }

  /** How many deliveries the lane takes now, out of `limit`. */
  room(limit: number): number {
    return limit - this.lane.gate.pending - this.parked.length;
  }

  /**
   * A delivery a pull brought: into the gate, or parked behind the fence. One brought after the
   * lane stopped is parked too, unprocessed, and handed back with the gate's waiting ones in stream
   * order (handed back at once, it would go first).
   */
  take(delivery: NatsDelivery): void {
    if (!this.running || this.fenced) this.parked.push(delivery);
    else this.#submit(delivery);
  }

  /** Every delivery held: in the gate, and parked. */
  *held(): IterableIterator<NatsDelivery> {
    yield* this.lane.held();
    yield* this.parked;
  }

  /**
   * The take-over fence. Whatever the lease says about the previous owner, the server's consumer
   * state decides: first every pull request still open on the partition's consumers must be gone
   * (one of the previous owner's could be handed later messages of a key); then the new owner
   * processes nothing until the server counts no copy as pending to anyone but this lane. While
   * copies are pending elsewhere, it waits one ack wait before it pulls: a vanished owner's copies
   * are then due again and come first; a slow owner's are settled by it, or handed back.
   */
  async fence(): Promise<void> {
    const { partition, jsm, logger, group } = this.#parts;
    let told = false;
    for (;;) {
      if (!this.isRunning()) return;
      const infos = await Promise.all(
        partition.sources.map((source) => jsm.consumers.info(source.stream, source.consumer)),
      );
      const waiting = infos.reduce((sum, info) => sum + info.num_waiting, 0);
      if (waiting === 0) break;
      if (!told) {
        told = true;
        logger.info('oncemq: a NATS partition taken over with pulls still open; waiting for them to end', {
          group,
          partition: partition.index,
          waiting,
        });
      }
      await sleep(FENCE_CHECK_MS);
    }
    if (await this.#onlyOurs()) {
      this.#openFence();
      return;
    }
    const { ackWaitMs } = this.#parts;
    logger.info(
      'oncemq: a NATS partition taken over with copies pending to another owner; waiting for them',
      { group, partition: partition.index, waitMs: ackWaitMs },
    );
    const until = Date.now() + ackWaitMs + 1000;
    while (this.isRunning() && Date.now() < until) await sleep(Math.min(FENCE_CHECK_MS, until - Date.now()));
  }

  /** Checks the fence until it opens; the pulls run meanwhile and park what they bring. */
  async watchFence(): Promise<void> {
    while (this.isRunning() && this.fenced) {
      if (await this.#onlyOurs()) this.#openFence();
      else await sleep(FENCE_CHECK_MS);
    }
  }

  /**
   * True when the server counts as pending exactly the copies parked in this lane. Each source's own
   * count is taken before its request: a copy received before the request was delivered before the
   * server's answer, so the answer counts every parked copy, and an equal count leaves none for
   * anyone else (a copy on its way to us only makes the server's count larger).
   */
  async #onlyOurs(): Promise<boolean> {
    for (const source of this.partition.sources) {
      // Distinct messages: a copy delivered again joins its first one.
      const ours = new Set(
        this.parked.filter((d) => d.msg.info.stream === source.stream).map((d) => d.msg.seq),
      ).size;
      const info = await this.#parts.jsm.consumers.info(source.stream, source.consumer);
      if (info.num_ack_pending !== ours) return false;
    }
    return true;
  }

  /** Every copy the server delivered earlier is settled or parked here: the parked ones go into the gate, in stream order. */
  #openFence(): void {
    if (!this.running || !this.fenced) return;
    this.fenced = false;
    const parked = this.parked.splice(0).sort((a, b) => a.msg.seq - b.msg.seq);
    for (const delivery of parked) this.#submit(delivery);
  }

  #submit(delivery: NatsDelivery): void {
    const { brokerId } = delivery.envelope;
    this.lane.submit(delivery.envelope, delivery, (error) => this.#parts.onError(brokerId, error));
  }

  /**
   * Stops the pulls, closes the gate (deliveries waiting behind their key or for a retry are handed
   * back, oldest first, so the next owner meets them in order), waits for the running ones to be
   * settled, then releases the lease through `release`: `clean` when nothing of ours is left pending
   * at the server.
   */
  end(release: (clean: boolean) => Promise<void>): Promise<void> {
    this.#stopped ??= (async () => {
      this.running = false;
      for (const pull of this.pulls) pull.stop();
      this.lane.close();
      await Promise.all(this.loops);
      await this.lane.drained();
      const waiting = [...this.held()].sort((a, b) => a.msg.seq - b.msg.seq);
      // A copy from a lost connection cannot be handed back: it comes back once its ack wait runs
      // out. Handing back the later ones now would put them first, so then none is handed back.
      if (waiting.some((delivery) => delivery.stale)) this.clean = false;
      else for (const delivery of waiting) await delivery.giveBack();
      this.parked.length = 0;
      await release(this.clean);
    })();
    return this.#stopped;
  }
}
