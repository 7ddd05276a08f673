import { errorText } from '../core/errors.js';
import type { Outcome } from '../core/outcome.js';
import type { ClaimStatus } from '../ledger/ledger.js';
import type { AttributesLike, ContextLike, OtelApiLike, SpanLike } from './otel-like.js';
import type { PipelineInstruments } from './pipeline-instruments.js';
import { ATTRIBUTES } from './telemetry-names.js';

/**
 * What the pipeline tells about one delivery as it goes: claim, handler, commit, outcome. One per
 * delivery; a no-op when telemetry is off.
 */
export interface DeliveryTrace {
  /** The ledger claim starts (again, for an immediate retry). */
  claimStarted(): void;
  /** The ledger answered the claim. */
  claimed(status: ClaimStatus): void;
  /** Runs the handler inside the delivery's span (its own spans become children) and times it. */
  handler<R>(run: () => R): R;
  /** The claim's transaction committed, or a leased claim was completed. */
  committed(): void;
  /** The outcome is known: counts it, records the durations, sets the outcome on the span and ends it. */
  finish(outcome: Outcome): void;
}

/**
 * The `handler` of a trace that neither times the handler nor gives it a context: the pipeline,
 * seeing it, calls the handler itself and spares a closure per delivery.
 */
export const runAsIs = <R>(run: () => R): R => run();

/** The trace of a pipeline without telemetry. */
export const NO_TRACE: DeliveryTrace = Object.freeze({
  claimStarted: () => undefined,
  claimed: () => undefined,
  handler: runAsIs,
  committed: () => undefined,
  finish: () => undefined,
});

/**
 * The trace of a delivery the sample did not take and that has no span: it is only counted. One per
 * pipeline, shared by those deliveries (nothing to allocate per delivery).
 */
export function countingTrace(instruments: PipelineInstruments): DeliveryTrace {
  return Object.freeze({
    ...NO_TRACE,
    finish: (outcome: Outcome) => instruments.outcome(outcome, undefined),
  });
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as { then?: unknown } | null)?.then === 'function';

/** The span of a delivery, if it has one, and the context its handler runs in. */
export interface DeliverySpan {
  readonly api: OtelApiLike;
  /** None for a delivery the sample did not take, whose producer's trace is not sampled. */
  readonly span: SpanLike | undefined;
  /** The context the handler runs in: the delivery's span set on the parent, or the parent. */
  readonly context: ContextLike;
}

/**
 * One delivery, counted in the pipeline's instruments, timed into its histograms when the sample
 * takes it (`timed`), and recorded into its span when it has one.
 */
export class RecordingTrace implements DeliveryTrace {
  readonly #started: number;
  /** The instruments whose histograms this delivery is timed into, when the sample took it. */
  readonly #timed: PipelineInstruments | undefined;
  #claimStarted: number;
  #handlerStarted = 0;

  /** `started`: the `performance.now()` at which the pipeline took the delivery (one clock read for both). */
  constructor(
    private readonly instruments: PipelineInstruments | undefined,
    private readonly delivery: DeliverySpan | undefined,
    started: number,
    timed: boolean,
  ) {
    this.#started = started;
    this.#claimStarted = started;
    this.#timed = timed ? instruments : undefined;
  }

  claimStarted(): void {
    if (this.#timed !== undefined) this.#claimStarted = performance.now();
  }

  claimed(status: ClaimStatus): void {
    this.#timed?.claim(status, (performance.now() - this.#claimStarted) / 1000);
    this.delivery?.span?.addEvent('claim', { [ATTRIBUTES.claimStatus]: status });
  }

  handler<R>(run: () => R): R {
    this.#handlerStarted = this.#timed === undefined ? 0 : performance.now();
    let out: R;
    try {
      out = this.delivery === undefined ? run() : this.delivery.api.context.with(this.delivery.context, run);
    } catch (error) {
      this.#handlerEnded(error);
      throw error;
    }
    if (!isThenable(out)) {
      this.#handlerEnded(undefined);
      return out;
    }
    return Promise.resolve(out).then(
      (value) => {
        this.#handlerEnded(undefined);
        return value;
      },
      (error: unknown) => {
        this.#handlerEnded(error);
        throw error;
      },
    ) as R;
  }

  #handlerEnded(error: unknown): void {
    const failed = error !== undefined;
    this.#timed?.handler(
      failed ? errorType(error) : undefined,
      (performance.now() - this.#handlerStarted) / 1000,
    );
    this.delivery?.span?.addEvent(
      'handler',
      failed ? { [ATTRIBUTES.errorType]: errorType(error) } : undefined,
    );
  }

  committed(): void {
    this.delivery?.span?.addEvent('commit');
  }

  finish(outcome: Outcome): void {
    this.instruments?.outcome(
      outcome,
      this.#timed === undefined ? undefined : (performance.now() - this.#started) / 1000,
    );
    if (this.delivery?.span !== undefined) endSpan(this.delivery.api, this.delivery.span, outcome);
  }
}

/** The name of an error's class, for `error.type`. */
function errorType(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/**
 * Sets the outcome on the span in one call and ends it: the span's end is the moment the outcome
 * was settled, so no `settle` event repeats what the span's attributes and end time already say.
 */
function endSpan(api: OtelApiLike, span: SpanLike, outcome: Outcome): void {
  const attributes: AttributesLike = {
    [ATTRIBUTES.outcome]: outcome.kind,
    [ATTRIBUTES.action]: outcome.action,
    [ATTRIBUTES.attempt]: outcome.deliveryCount,
  };
  if (outcome.key !== null) attributes[ATTRIBUTES.key] = outcome.key;
  switch (outcome.kind) {
    case 'duplicate':
    case 'busy':
      attributes[ATTRIBUTES.duplicateSource] = outcome.source;
      break;
    case 'dead':
    case 'conflict':
      attributes[ATTRIBUTES.deadLetterReason] = outcome.reason;
      attributes[ATTRIBUTES.errorType] = errorType(outcome.error);
      break;
    case 'retry':
      attributes[ATTRIBUTES.errorType] = errorType(outcome.error);
      break;
    default:
      break;
  }
  span.setAttributes(attributes);
  if (outcome.kind === 'dead' || outcome.kind === 'conflict' || outcome.kind === 'retry')
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: errorText(outcome.error) });
  span.end();
}
