import type { Envelope } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { Processor, StartPosition } from '../transport.js';
import type { CheckedSubscribe } from '../subscribe-options.js';
import type { AmqpMessageLike } from './rabbitmq-driver.js';
import { settlesWithin, type RabbitChannel } from './rabbitmq-channel.js';
import { withEnvelope, type Delivery } from './rabbitmq-settler.js';
import { RabbitMember, type RabbitSubscriptionContext } from './rabbitmq-member.js';
import { processAndSettleBatch } from '../settle-batch.js';
import { settle, type DeliveryResult } from '../settler.js';

/** AMQP's prefetch count is an unsigned 16-bit number: concurrency and batch size stay within it. */
export const MAX_PREFETCH = 65535;

/** Most times in a row the failure backoff doubles. */
const MAX_BACKOFF_DOUBLINGS = 4;

/**
 * One member of a group: a consumer on the group's work queue, on a confirm channel of its own.
 * `concurrency` is the channel's prefetch; deliveries waiting when a slot frees go to
 * `processBatch` together, up to `batchSize`. When the channel is lost (connection drop, a
 * consumer cancel), its unacked deliveries go back to the queue at the broker, the outcomes still
 * coming for them are dropped (their tags are dead), and a new channel re-declares and consumes.
 */
export class RabbitSubscription extends RabbitMember {
  readonly #batchSize: number;
  readonly #from: StartPosition;
  readonly #tasks = new Set<Promise<void>>();
  readonly #backoffs = new Set<{ timer: NodeJS.Timeout; deliveries: readonly Delivery[] }>();
  #channel: RabbitChannel | undefined;
  #consumerTag: string | undefined;
  #waiting: Delivery[] = [];
  #active = 0;
  #failures = 0;
  #pumpScheduled = false;

  /** @internal made by the transport's `subscribe()`, after `checkSubscribe` */
  constructor(
    ctx: RabbitSubscriptionContext,
    subscribe: CheckedSubscribe,
    processor: Processor,
    consumerName?: string,
  ) {
    super(ctx, subscribe, processor, consumerName, MAX_PREFETCH);
    this.#batchSize = subscribe.batchSize;
    this.#from = subscribe.from;
  }

  /** Declares (or checks) the group's topology and starts consuming; a failure here is the caller's. */
  async start(): Promise<void> {
    await this.#consume();
  }

  /** @internal */
  protected consuming(): boolean {
    return this.#channel !== undefined;
  }

  /** @internal */
  protected consumeAgain(): Promise<void> {
    return this.#consume();
  }

  async #consume(): Promise<void> {
    const { topology, connection, settings } = this.ctx;
    await topology.group(this.group, this.topics, this.#from);
    const channel = await connection.channel(`consume ${this.group}`, settings.publishTimeoutMs);
    const work = topology.names.work(this.group);
    try {
      // A connection cut while these wait for their reply fails them with the transport's error.
      await channel.call('prefetch', (raw) => raw.prefetch(this.concurrency));
      this.channels++;
      const { consumerTag } = await channel.call('consume', (raw) =>
        raw.consume(
          work,
          (message) => {
            this.#receive(channel, message);
          },
          { noAck: false, consumerTag: `${this.consumerName}#${this.channels}` },
        ),
      );
      if (!this.running) {
        await channel.close();
        return;
      }
      this.#channel = channel;
      this.#consumerTag = consumerTag;
      channel.onClose(() => {
        this.#lost(channel, 'the channel closed');
      });
    } catch (error) {
      await channel.close();
      throw error;
    }
  }

  #receive(channel: RabbitChannel, message: AmqpMessageLike | null): void {
    if (message === null) {
      // The server cancelled the consumer (queue deleted, node lost): re-declare and consume again.
      this.ctx.topology.forget(this.ctx.topology.names.work(this.group));
      this.#lost(channel, 'the server cancelled the consumer');
      void channel.close();
      return;
    }
    this.#waiting.push({ channel, message, settled: false });
    if (!this.#pumpScheduled) {
      this.#pumpScheduled = true;
      // Deliveries of one read arrive together: wait for the rest of them before forming batches.
      setImmediate(() => {
        this.#pumpScheduled = false;
        this.#pump();
      });
    }
  }

  #lost(channel: RabbitChannel, why: string): void {
    if (this.#channel !== channel && this.#channel !== undefined) return;
    this.#channel = undefined;
    this.#consumerTag = undefined;
    // Deliveries not started yet come again from the broker; those in progress finish as stale.
    this.#waiting = this.#waiting.filter((delivery) => delivery.channel !== channel);
    if (this.running) this.recovery.start(why);
  }

  #pump(): void {
    while (this.running && this.#waiting.length > 0 && this.#active < this.concurrency) {
      const room = Math.min(this.#batchSize, this.concurrency - this.#active);
      const batch = this.#waiting.splice(0, room).filter((delivery) => delivery.channel.open);
      if (batch.length === 0) continue;
      this.#active += batch.length;
      const task = this.#run(batch).finally(() => {
        this.#tasks.delete(task);
      });
      this.#tasks.add(task);
    }
  }

  async #run(batch: readonly Delivery[]): Promise<void> {
    let release = batch.length;
    try {
      const due: Delivery[] = [];
      for (const delivery of batch) {
        if (!(await this.#parked(delivery))) due.push(delivery);
      }
      if (due.length === 0) return;
      const failed: Delivery[] = [];
      let thrown: unknown;
      const settleable = due.map((delivery) => {
        const enveloped = withEnvelope(delivery);
        return {
          envelope: enveloped.envelope,
          settle: async (result: DeliveryResult): Promise<void> => {
            try {
              if ((await settle(this.settler, enveloped, result)) !== 'unsettled') return;
              if ('error' in result) thrown ??= result.error;
            } catch (error) {
              this.ctx.settings.logger.error('oncemq: could not settle a delivery at RabbitMQ', {
                group: this.group,
                error: errorText(error),
              });
            }
            failed.push(delivery);
          },
        };
      });
      await processAndSettleBatch(this.#processBatch(due.length), settleable);
      if (failed.length > 0) {
        release -= failed.length;
        this.#failed(failed, thrown);
      } else this.#failures = 0;
    } finally {
      this.#active -= release;
      this.#pump();
    }
  }

  /** `processBatch` for more than one delivery where the processor has it, else `process` of the one. */
  #processBatch(size: number): NonNullable<Processor['processBatch']> {
    const processor = this.processor;
    if (size > 1 && processor.processBatch !== undefined) {
      return (envelopes) => (processor.processBatch as NonNullable<Processor['processBatch']>)(envelopes);
    }
    return async (envelopes) => [await processor.process(envelopes[0] as Envelope)];
  }

  /** A retry copy not due yet goes round again (false when it is due, or could not be parked). */
  async #parked(delivery: Delivery): Promise<boolean> {
    try {
      return await this.settler.parkUntilDue(delivery);
    } catch (error) {
      this.ctx.settings.logger.warn('oncemq: could not park a retry copy; processing it now', {
        group: this.group,
        error: errorText(error),
      });
      return false;
    }
  }

  /**
   * Not the messages' fault (the processor threw, a copy was not confirmed): nothing is acked and,
   * after a backoff that grows with failures in a row, the deliveries go back to the queue.
   */
  #failed(deliveries: readonly Delivery[], error: unknown): void {
    const { failureBackoffMs, logger } = this.ctx.settings;
    if (error !== undefined) {
      logger.error('oncemq: the processor threw; the deliveries stay unacked', {
        group: this.group,
        error: errorText(error),
      });
    }
    const wait = failureBackoffMs * 2 ** Math.min(this.#failures, MAX_BACKOFF_DOUBLINGS);
    this.#failures++;
    const entry = {
      deliveries,
      timer: setTimeout(() => {
        this.#backoffs.delete(entry);
        this.#handBack(deliveries);
      }, wait),
    };
    this.#backoffs.add(entry);
  }

  /** Hands deliveries back to the queue; `active` when they held processing slots. */
  #handBack(deliveries: readonly Delivery[], active = true): void {
    for (const delivery of deliveries) {
      if (!delivery.settled) delivery.channel.requeue(delivery.message);
      delivery.settled = true;
    }
    if (!active) return;
    this.#active -= deliveries.length;
    this.#pump();
  }

  /**
   * Stops the consumer, hands back what was received and not started, waits for the deliveries in
   * progress to be settled, then closes the channel.
   */
  async close(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    const channel = this.#channel;
    if (channel !== undefined && this.#consumerTag !== undefined) {
      // Bounded like a close: a broker that stopped answering never holds the close here.
      await settlesWithin(channel.raw.cancel(this.#consumerTag), this.ctx.settings.closeTimeoutMs);
    }
    this.#handBack(this.#waiting.splice(0), false);
    await this.recovery.running;
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    for (const entry of [...this.#backoffs]) {
      clearTimeout(entry.timer);
      this.#backoffs.delete(entry);
      this.#handBack(entry.deliveries);
    }
    await channel?.close();
    this.#channel = undefined;
    this.onClosed?.();
  }
}
