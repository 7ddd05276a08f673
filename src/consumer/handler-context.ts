import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import { sha256Hex } from '../core/fingerprint.js';
import type { OutboxMessage } from '../outbox/outbox-message.js';
import type { Outbox, OutboxEntry } from '../outbox/outbox.js';
import type { SignalSource } from './lease-keeper.js';

/**
 * How a claim and its effect relate. `transactional`: the claim, the handler's writes through
 * `ctx.tx` and the completion are one local transaction (exactly-once database effect; SQL ledgers).
 * `leased`: the claim commits a lease first and the handler runs outside any transaction, for
 * effects outside the database (at-least-once to the downstream, which gets `ctx.downstreamKey`).
 */
export type Mode = 'transactional' | 'leased';

/** What a handler gets beside the decoded message. */
export interface HandlerContext<Tx> {
  /** The delivery as the transport handed it over: broker id, topic, headers, body, delivery count. */
  readonly envelope: Envelope;
  /** The pipeline's consumer group. */
  readonly group: string;
  /** The normalized business key. */
  readonly key: string;
  /** Execution number of this key: 1 for the first, +1 after each failed or expired attempt. */
  readonly attempt: number;
  /** The pipeline's mode: whether {@link tx} exists (`transactional`) or {@link signal} matters (`leased`). */
  readonly mode: Mode;
  /**
   * The ledger's transaction (transactional mode): write the business effect through it so that the
   * claim and the effect commit or roll back together. Reading it in leased mode throws.
   */
  readonly tx: Tx;
  /** Aborted when the lease is lost (leased mode): stop, another owner has the key. */
  readonly signal: AbortSignal;
  /**
   * A stable idempotency key for a call to another system, the same on every attempt of this
   * `(group, key, step)`: pass it to payment APIs and the like so a re-run after a crash is absorbed there.
   */
  downstreamKey(step?: string): string;
  /**
   * Follow-up messages written in this delivery's transaction, with the claim and the business write
   * (transactional mode, a pipeline configured with `outbox`): they are sent only if it commits.
   */
  readonly outbox: HandlerOutbox;
}

/** `ctx.outbox`: the pipeline's outbox bound to the delivery's transaction. */
export interface HandlerOutbox {
  /**
   * Writes a follow-up message into the outbox table in the delivery's transaction; the relay sends
   * it once that transaction commits, and never if it rolls back.
   */
  add(message: OutboxMessage): Promise<OutboxEntry>;
}

/** The idempotency key `ctx.downstreamKey(step)` returns: 32 hex characters of SHA-256(group, key, step). */
export function downstreamKey(group: string, key: string, step = 'effect'): string {
  return sha256Hex(`${group}\u0000${key}\u0000${step}`).slice(0, 32);
}

/** A {@link HandlerContext}; a class so that each delivery allocates one plain object. */
export class PipelineContext<Tx> implements HandlerContext<Tx> {
  readonly #tx: Tx | undefined;
  readonly #signal: SignalSource;
  readonly #outbox: Outbox<Tx> | undefined;

  constructor(
    readonly envelope: Envelope,
    readonly group: string,
    readonly key: string,
    readonly attempt: number,
    readonly mode: Mode,
    tx: Tx | undefined,
    signal: SignalSource,
    outbox?: Outbox<Tx>,
  ) {
    this.#tx = tx;
    this.#signal = signal;
    this.#outbox = outbox;
  }

  get outbox(): HandlerOutbox {
    const outbox = this.#outbox;
    if (outbox === undefined) {
      throw new ConfigError(
        'outbox',
        'ctx.outbox needs an outbox: createPipeline({ ..., outbox: createOutbox({ ledger }) })',
      );
    }
    const tx = this.tx;
    return { add: (message) => outbox.add(tx, message) };
  }

  /** Read lazily: a leased handler that never looks at its signal never costs an AbortController. */
  get signal(): AbortSignal {
    return this.#signal.signal;
  }

  get tx(): Tx {
    if (this.#tx === undefined) throw new ConfigError('mode', "ctx.tx exists only in 'transactional' mode");
    return this.#tx;
  }

  downstreamKey(step?: string): string {
    return downstreamKey(this.group, this.key, step);
  }
}
