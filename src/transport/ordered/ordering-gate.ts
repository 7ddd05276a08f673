import { parseDuration } from '../../core/duration.js';
import { createEnvelope, ORDERING_KEY_HEADER, type Envelope } from '../../core/envelope.js';
import { ConfigError, errorText } from '../../core/errors.js';
import { DEFAULT_LOGGER } from '../../core/console-logger.js';
import type { Logger } from '../../core/logger.js';
import { unprocessedBase, type Outcome } from '../../core/outcome.js';
import type { OrderingKeySource, OrderingOptions, Processor } from '../transport.js';

export const DEFAULT_ORDERING_OPTIONS = Object.freeze({
  key: 'orderingKey',
  onExhausted: 'dead-letter',
  blockedRetryEvery: '1m',
  onPartitionChange: 'refuse',
} as const);

/** Why a queued delivery of a closing gate gets no outcome: it stays unsettled and comes again. */
export class GateClosedError extends Error {
  override name = 'GateClosedError' as const;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new GateClosedError('the ordering gate closed'));
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      resolve();
    }, ms);
    const stop = (): void => {
      clearTimeout(timer);
      reject(new GateClosedError('the ordering gate closed'));
    };
    signal.addEventListener('abort', stop, { once: true });
  });

/** Compiles where the ordering key comes from. */
export function compileOrderingKey(source: OrderingKeySource): (envelope: Envelope) => string | undefined {
  if (source === 'orderingKey')
    return (envelope) => envelope.orderingKey ?? envelope.headers[ORDERING_KEY_HEADER];
  if (typeof source === 'function') return source;
  if (typeof source === 'object' && typeof source.header === 'string' && source.header !== '') {
    const header = source.header;
    return (envelope) => envelope.headers[header];
  }
  throw new ConfigError('ordering.key', "expected 'orderingKey', { header } or a function of the envelope");
}

/** Checks ordering options when a subscription starts, rather than at its first delivery. */
export function checkOrderingOptions(options: OrderingOptions): void {
  new OrderingGate(
    { process: () => Promise.reject(new Error('not started')) },
    { ...options, concurrency: 1 },
  ).close();
}

/** The same delivery, to be run again with the delivery count the retry carries. */
function again(envelope: Envelope, deliveryCount: number): Envelope {
  if (deliveryCount === envelope.deliveryCount) return envelope;
  return createEnvelope({
    brokerId: envelope.brokerId,
    topic: envelope.topic,
    headers: envelope.headers,
    body: envelope.body,
    deliveryCount,
    ...(envelope.brokerDeliveryCount === undefined
      ? {}
      : { brokerDeliveryCount: envelope.brokerDeliveryCount }),
    ...(envelope.publishedAt === undefined ? {} : { publishedAt: envelope.publishedAt }),
    ...(envelope.orderingKey === undefined ? {} : { orderingKey: envelope.orderingKey }),
    ...(envelope.keepAlive === undefined ? {} : { keepAlive: envelope.keepAlive }),
  });
}

/**
 * Per-key ordered consumption over any processor: deliveries of one ordering key run one at a time in
 * the order they were submitted; deliveries of different keys run in parallel, up to `concurrency` at
 * once. A delivery that fails is retried **in place** after the outcome's delay — the key's later
 * deliveries wait behind it, other keys go on — so a retry never reorders a key (a retry queue would).
 * Each submitted delivery resolves with its final outcome, `ack` or `dead-letter`, never `retry`.
 * Deliveries without an ordering key run as soon as a slot is free.
 */
export class OrderingGate {
  readonly #processor: Processor;
  readonly #keyOf: (envelope: Envelope) => string | undefined;
  readonly #concurrency: number;
  readonly #onExhausted: 'dead-letter' | 'block';
  readonly #blockedRetryMs: number;
  readonly #logger: Logger;
  /** The last delivery queued for each key: the next one of that key starts after it. */
  readonly #tails = new Map<string, Promise<unknown>>();
  readonly #slotWaiters: (() => void)[] = [];
  readonly #closing = new AbortController();
  #running = 0;
  #pending = 0;
  #idle: (() => void)[] = [];

  constructor(
    processor: Processor,
    options: OrderingOptions & { readonly concurrency: number; readonly logger?: Logger },
  ) {
    this.#processor = processor;
    this.#keyOf = compileOrderingKey(options.key ?? DEFAULT_ORDERING_OPTIONS.key);
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
      throw new ConfigError('concurrency', `must be a whole number >= 1, got ${options.concurrency}`);
    }
    this.#concurrency = options.concurrency;
    const onExhausted = options.onExhausted ?? DEFAULT_ORDERING_OPTIONS.onExhausted;
    if (!(['dead-letter', 'block'] as unknown[]).includes(onExhausted)) {
      throw new ConfigError(
        'ordering.onExhausted',
        `expected 'dead-letter' or 'block', got ${JSON.stringify(onExhausted)}`,
      );
    }
    this.#onExhausted = onExhausted;
    const onPartitionChange = options.onPartitionChange ?? DEFAULT_ORDERING_OPTIONS.onPartitionChange;
    if (!(['refuse', 'drain'] as unknown[]).includes(onPartitionChange)) {
      throw new ConfigError(
        'ordering.onPartitionChange',
        `expected 'refuse' or 'drain', got ${JSON.stringify(onPartitionChange)}`,
      );
    }
    this.#blockedRetryMs = parseDuration(
      options.blockedRetryEvery ?? DEFAULT_ORDERING_OPTIONS.blockedRetryEvery,
      'ordering.blockedRetryEvery',
    );
    this.#logger = options.logger ?? DEFAULT_LOGGER;
  }

  /** Deliveries submitted and not yet answered (queued behind their key, running or waiting to retry). */
  get pending(): number {
    return this.#pending;
  }

  /**
   * Queues a delivery behind the earlier ones of its key and resolves with its final outcome. Rejects
   * with {@link GateClosedError} when the gate closes first: the delivery must stay unsettled.
   * `answered` is the outcome of an attempt already made outside the gate (a batch's `retry`): the
   * gate goes on from it in place — waits its delay, then runs the delivery again — instead of
   * running it first.
   */
  submit(envelope: Envelope, answered?: Outcome): Promise<Outcome> {
    const key = this.#keyOf(envelope);
    this.#pending++;
    const previous = key === undefined ? undefined : this.#tails.get(key);
    const run = (previous ?? Promise.resolve()).then(() => this.#inPlace(envelope, answered));
    if (key !== undefined) {
      const tail = run.then(
        () => undefined,
        () => undefined,
      );
      this.#tails.set(key, tail);
      void tail.then(() => {
        if (this.#tails.get(key) === tail) this.#tails.delete(key);
      });
    }
    return run.finally(() => {
      this.#pending--;
      if (this.#pending === 0) for (const resolve of this.#idle.splice(0)) resolve();
    });
  }

  /**
   * Whether the gate answers `outcome` (the delivery's end: settle it) or runs the delivery again in
   * place: a `retry` always runs again; a `retries-exhausted` dead letter runs again after
   * `blockedRetryEvery` when `onExhausted` is `block`, so its key stays blocked and nothing is settled.
   */
  answers(outcome: Outcome): boolean {
    if (outcome.action === 'ack') return true;
    if (outcome.action === 'retry') return false;
    return (
      this.#onExhausted === 'dead-letter' || outcome.kind !== 'dead' || outcome.reason !== 'retries-exhausted'
    );
  }

  /** Resolves when nothing is pending. */
  drained(): Promise<void> {
    if (this.#pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Stops retrying: waiting deliveries reject with {@link GateClosedError}; running ones finish. */
  close(): void {
    this.#closing.abort();
    for (const wake of this.#slotWaiters.splice(0)) wake();
  }

  async #inPlace(first: Envelope, answered: Outcome | undefined): Promise<Outcome> {
    let envelope = first;
    let known = answered;
    for (;;) {
      const outcome = known ?? (await this.#once(envelope));
      known = undefined;
      if (this.answers(outcome)) return outcome;
      if (outcome.action !== 'retry') {
        this.#logger.warn(
          'oncemq: ordering key blocked: its message used up its retries and is tried again',
          {
            key: outcome.key,
            brokerId: envelope.brokerId,
            inMs: this.#blockedRetryMs,
            error: errorText('error' in outcome ? outcome.error : undefined),
          },
        );
        await this.#wait(envelope, this.#blockedRetryMs);
        continue;
      }
      await this.#wait(envelope, outcome.delayMs);
      envelope = again(envelope, outcome.nextDeliveryCount);
    }
  }

  /** One attempt in a slot; a processor that throws is a short, uncharged retry (not the message's fault). */
  async #once(envelope: Envelope): Promise<Outcome> {
    await this.#slot();
    try {
      return await this.#processor.process(envelope);
    } catch (error) {
      if (this.#closing.signal.aborted)
        throw new GateClosedError('the ordering gate closed', { cause: error });
      this.#logger.error('oncemq: the processor threw; the ordered delivery is tried again', {
        brokerId: envelope.brokerId,
        error: errorText(error),
      });
      return {
        ...unprocessedBase(envelope),
        kind: 'retry',
        action: 'retry',
        delayMs: 100,
        nextDeliveryCount: envelope.deliveryCount,
        reconsumeTimes: envelope.deliveryCount - 1,
        error,
      };
    } finally {
      this.#release();
    }
  }

  /** Waits a retry's delay in place, keeping the delivery alive at the broker meanwhile. */
  async #wait(envelope: Envelope, ms: number): Promise<void> {
    const keepAlive = envelope.keepAlive;
    if (keepAlive === undefined || ms <= keepAlive.everyMs) {
      await sleep(ms, this.#closing.signal);
      return;
    }
    const until = Date.now() + ms;
    for (let left = ms; left > 0; left = until - Date.now()) {
      await sleep(Math.min(left, keepAlive.everyMs), this.#closing.signal);
      if (until - Date.now() > 0) {
        await keepAlive.extend().catch((error: unknown) => {
          this.#logger.warn('oncemq: could not keep a delivery waiting for its retry', {
            brokerId: envelope.brokerId,
            error: errorText(error),
          });
        });
      }
    }
  }

  async #slot(): Promise<void> {
    while (this.#running >= this.#concurrency) {
      if (this.#closing.signal.aborted) throw new GateClosedError('the ordering gate closed');
      await new Promise<void>((resolve) => this.#slotWaiters.push(resolve));
    }
    if (this.#closing.signal.aborted) throw new GateClosedError('the ordering gate closed');
    this.#running++;
  }

  #release(): void {
    this.#running--;
    this.#slotWaiters.shift()?.();
  }
}
