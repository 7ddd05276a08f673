import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorText } from '../../core/errors.js';
import { wholeNumber } from '../config-checks.js';
import type { CheckedSubscribe } from '../subscribe-options.js';
import type { Processor, Subscription } from '../transport.js';
import type { RabbitSettings } from './rabbitmq-config.js';
import type { RabbitConnection } from './rabbitmq-connection.js';
import { RabbitSettler } from './rabbitmq-settler.js';
import type { RabbitTopology } from './rabbitmq-topology.js';

/** What a subscription shares with its transport. */
export interface RabbitSubscriptionContext {
  readonly settings: RabbitSettings;
  readonly connection: RabbitConnection;
  readonly topology: RabbitTopology;
}

/**
 * Consumes again after a lost channel, while `lost()` says it is still needed (the member runs and
 * has no channel), waiting `reconnectDelay` first and twice as long after each failure. One loop at
 * a time per member.
 */
export class ConsumeAgain {
  readonly #ctx: RabbitSubscriptionContext;
  readonly #group: string;
  readonly #lost: () => boolean;
  readonly #consume: () => Promise<void>;
  #loop: Promise<void> | undefined;

  constructor(
    ctx: RabbitSubscriptionContext,
    group: string,
    lost: () => boolean,
    consume: () => Promise<void>,
  ) {
    this.#ctx = ctx;
    this.#group = group;
    this.#lost = lost;
    this.#consume = consume;
  }

  /** The loop running, if any (a closing member waits for it). */
  get running(): Promise<void> | undefined {
    return this.#loop;
  }

  /** Starts the loop unless one runs. */
  start(why: string): void {
    if (this.#loop !== undefined) return;
    this.#ctx.settings.logger.warn('oncemq: RabbitMQ consumer lost; consuming again', {
      group: this.#group,
      why,
    });
    this.#loop = this.#run().finally(() => {
      this.#loop = undefined;
    });
  }

  async #run(): Promise<void> {
    const { reconnectDelayMs, maxReconnectDelayMs, logger } = this.#ctx.settings;
    let delay = reconnectDelayMs;
    while (this.#lost()) {
      await sleep(delay);
      if (!this.#lost()) return;
      try {
        await this.#consume();
      } catch (error) {
        logger.warn('oncemq: could not consume again yet', { group: this.#group, error: errorText(error) });
        delay = Math.min(delay * 2, maxReconnectDelayMs);
      }
    }
  }
}

/**
 * What both kinds of RabbitMQ member (unordered and ordered) are built from: the subscribe checked by
 * `checkSubscribe`, the processor, the group's settler, the consumer name, whether the member still
 * runs, and the loop that consumes again after a lost channel. A subclass says whether it has a
 * channel consuming now ({@link consuming}) and how it consumes again ({@link consumeAgain}).
 */
export abstract class RabbitMember implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  /** @internal what the member shares with its transport */
  protected readonly ctx: RabbitSubscriptionContext;
  /** @internal */
  protected readonly processor: Processor;
  /** @internal the group's settler */
  protected readonly settler: RabbitSettler;
  /** @internal deliveries processed at once, checked against the kind's own limit */
  protected readonly concurrency: number;
  /** @internal the prefix of the member's consumer tags */
  protected readonly consumerName: string;
  /** @internal consumes again after a lost channel */
  protected readonly recovery: ConsumeAgain;
  /** @internal false once the member closed (or stopped itself) */
  protected running = true;
  /** @internal the transport's callback once the member closed */
  protected onClosed: (() => void) | undefined;
  /** Channels opened for this member so far (1 + recoveries). */
  channels = 0;

  constructor(
    ctx: RabbitSubscriptionContext,
    subscribe: CheckedSubscribe,
    processor: Processor,
    consumerName: string | undefined,
    maxConcurrency: number,
  ) {
    const { group } = subscribe;
    this.ctx = ctx;
    this.group = group;
    this.topics = subscribe.topics;
    this.processor = processor;
    this.settler = new RabbitSettler(ctx.settings, ctx.topology, group);
    this.concurrency = wholeNumber(subscribe.concurrency, 'concurrency', 1, maxConcurrency);
    this.consumerName = consumerName ?? `${hostname()}:${process.pid}`;
    this.recovery = new ConsumeAgain(
      ctx,
      group,
      () => this.running && !this.consuming(),
      () => this.consumeAgain(),
    );
  }

  /** @internal called by the transport to forget a closed subscription */
  set onClose(fn: () => void) {
    this.onClosed = fn;
  }

  /** Declares (or checks) the group's topology and starts consuming; a failure here is the caller's. */
  abstract start(): Promise<void>;

  abstract close(): Promise<void>;

  /** @internal whether a channel of this member consumes now */
  protected abstract consuming(): boolean;

  /** @internal consumes again after the channel was lost (run by `recovery`) */
  protected abstract consumeAgain(): Promise<void>;
}
