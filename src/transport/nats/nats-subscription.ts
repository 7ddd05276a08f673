import { errorText } from '../../core/errors.js';
import { processAndSettleBatch } from '../settle-batch.js';
import type { Processor, Subscription } from '../transport.js';
import { DeliverySlots } from '../delivery-slots.js';
import { NatsDelivery, type DeliveryContext, type DeliverySource } from './nats-delivery.js';
import { NatsPull, type PulledMessage } from './nats-pull.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** What a subscription is made of; the transport builds it once the topology is in place. */
export interface NatsSubscriptionParts {
  readonly ctx: DeliveryContext;
  /** One topic's consumer per topic, then the group's retry consumer. */
  readonly sources: readonly DeliverySource[];
  /** Creates (topology `create`) or checks a source's stream and consumer again after a pull failed. */
  readonly ensure: (source: DeliverySource) => Promise<void>;
  readonly processor: Processor;
  readonly concurrency: number;
  /** Deliveries handed to `processBatch` at once; 1 hands them one by one to `process`. */
  readonly batchSize: number;
}

/**
 * One member of a group: a pull loop per source (each topic's durable consumer and the group's
 * retry consumer), sharing `concurrency` slots. A loop asks only for as many messages as there are
 * free slots, so no message waits in a client buffer while its ack wait runs; each delivery is
 * settled after its outcome, in the session it arrived in.
 */
export class NatsSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly #parts: NatsSubscriptionParts;
  readonly #slots: DeliverySlots;
  readonly #inflight = new Set<Promise<void>>();
  readonly #pulls = new Set<NatsPull>();
  #loops: Promise<void>[] = [];
  #pending: NatsDelivery[] = [];
  #flushScheduled = false;
  #closing = false;
  #closed: Promise<void> | undefined;
  #signalClose: () => void = () => undefined;
  readonly #closingSignal = new Promise<void>((resolve) => (this.#signalClose = resolve));
  #offLoss: () => void = () => undefined;
  /** Called once closed (the transport forgets it). */
  onClose: () => void = () => undefined;

  /** @internal made by the transport's `subscribe()` */
  constructor(group: string, topics: readonly string[], parts: NatsSubscriptionParts) {
    this.group = group;
    this.topics = Object.freeze([...topics]);
    this.#parts = parts;
    this.#slots = new DeliverySlots(parts.concurrency);
  }

  /** Read through a method: the loops check it again after every wait. */
  #isClosing(): boolean {
    return this.#closing;
  }

  /** @internal started by the transport's `subscribe()` */
  start(): void {
    // A lost connection ends its session: its pulls stop (what they still bring is redelivered later).
    this.#offLoss = this.#parts.ctx.session.onLoss(() => {
      for (const pull of this.#pulls) pull.stop();
    });
    this.#loops = this.#parts.sources.map((source) => this.#pullLoop(source));
  }

  /**
   * Asks for the slots free, on one pull per session. A busy source does not wait for one request to
   * end before the next: slots freed while a request is still bringing its messages make a request of
   * their own, so no slot waits a round trip for the request before it. A source whose last request
   * expired short (an idle retry stream) asks for one slot at a time: a request holds its slots at the
   * server until it expires, and the busy sources need them meanwhile.
   */
  async #pullLoop(source: DeliverySource): Promise<void> {
    const { ctx, batchSize, concurrency } = this.#parts;
    let idle = source.topic === null;
    let failure: Error | undefined;
    while (!this.#closing) {
      await Promise.race([ctx.session.whenConnected(), this.#closingSignal]);
      if (this.#isClosing() || ctx.connection.isClosed()) break;
      if (failure !== undefined) {
        const error = failure;
        failure = undefined;
        await this.#recover(source, error);
        continue;
      }
      const pull = new NatsPull(
        ctx.connection,
        source,
        { expiresMs: ctx.settings.pullExpiresMs, idle },
        {
          message: (msg, holdsSlot) => this.#receive(source, msg, holdsSlot),
          unfilled: (count) => this.#slots.release(count),
        },
      );
      this.#pulls.add(pull);
      while (pull.isRunning()) {
        while (pull.idle && pull.outstanding > 0 && pull.isRunning()) await pull.changed();
        if (!pull.isRunning()) break;
        const want = await this.#slots.acquire(pull.idle ? 1 : batchSize > 1 ? batchSize : concurrency);
        if (want === 0) break;
        if (!pull.isRunning()) {
          this.#slots.release(want);
          break;
        }
        pull.request(want);
      }
      // Closing: what the requests still bring goes back at once, until they are filled or expire.
      while (pull.isRunning() && pull.outstanding > 0) await pull.changed();
      pull.stop();
      this.#pulls.delete(pull);
      idle = pull.idle;
      failure = pull.failure;
    }
  }

  /** A pull failed (heartbeats missed, consumer deleted, no responders): check the consumer, then pull again. */
  async #recover(source: DeliverySource, error: unknown): Promise<void> {
    if (this.#closing) return;
    const { logger, failureBackoffMs } = this.#parts.ctx.settings;
    const fields = { group: this.group, stream: source.stream, consumer: source.consumer };
    logger.warn('oncemq: a NATS pull failed; checking the consumer and pulling again', {
      ...fields,
      error: errorText(error),
    });
    try {
      await this.#parts.ensure(source);
    } catch (failure) {
      logger.error('oncemq: the NATS consumer cannot be used; trying again', {
        ...fields,
        error: errorText(failure),
      });
    }
    await Promise.race([sleep(Math.max(100, failureBackoffMs)), this.#closingSignal]);
  }

  /** Gives one slot back, once: when the delivery's settle went out, or when its work ended. */
  #slotRelease(): () => void {
    let held = true;
    return () => {
      if (held) this.#slots.release(1);
      held = false;
    };
  }

  #receive(source: DeliverySource, msg: PulledMessage, holdsSlot: boolean): void {
    const delivery = new NatsDelivery(this.#parts.ctx, source, msg);
    const release = holdsSlot ? this.#slotRelease() : () => undefined;
    // The next delivery may start once this one's settle went out; its confirm is awaited on the side.
    delivery.onSent = release;
    const replayGroup = delivery.replayGroup;
    if (replayGroup !== undefined && replayGroup !== this.group) {
      this.#track(delivery.skip(), release);
      return;
    }
    if (!holdsSlot || this.#closing) {
      this.#track(delivery.giveBack(), release);
      return;
    }
    const wait = (delivery.dueAt ?? 0) - Date.now();
    if (wait > 0) {
      this.#track(delivery.postpone(wait), release);
      return;
    }
    if (this.#parts.batchSize <= 1) {
      this.#track(this.#processOne(delivery), release);
      return;
    }
    this.#pending.push(delivery);
    if (this.#pending.length >= this.#parts.batchSize) this.#flush();
    else if (!this.#flushScheduled) {
      // What one pull brought arrives in one burst: hand it over as one batch.
      this.#flushScheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  #flush(): void {
    this.#flushScheduled = false;
    const batch = this.#pending.splice(0);
    // Each delivery of the batch gives its slot back once its settle went out.
    const releases = batch.map((delivery) => (delivery.onSent = this.#slotRelease()));
    if (batch.length > 0)
      this.#track(this.#processBatch(batch), () => {
        for (const release of releases) release();
      });
  }

  #track(work: Promise<void>, done: () => void): void {
    const tracked = work.finally(() => {
      this.#inflight.delete(tracked);
      done();
    });
    this.#inflight.add(tracked);
  }

  async #processOne(delivery: NatsDelivery): Promise<void> {
    try {
      const outcome = await this.#parts.processor.process(delivery.envelope);
      await delivery.settle({ outcome });
    } catch (error) {
      await delivery.settle({ error });
    }
  }

  async #processBatch(batch: readonly NatsDelivery[]): Promise<void> {
    const { processor } = this.#parts;
    if (processor.processBatch === undefined) {
      await Promise.all(batch.map((delivery) => this.#processOne(delivery)));
      return;
    }
    await processAndSettleBatch(processor.processBatch.bind(processor), batch);
  }

  /**
   * Stops pulling (what the pulls in progress still bring goes back at once, for another member),
   * waits for every delivery in hand to reach its outcome and be settled, then leaves.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    this.#signalClose();
    this.#slots.close();
    await Promise.all(this.#loops);
    this.#flush();
    while (this.#inflight.size > 0) await Promise.all([...this.#inflight]);
    this.#offLoss();
    this.onClose();
  }
}
