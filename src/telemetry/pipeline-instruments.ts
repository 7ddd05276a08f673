import type { Outcome } from '../core/outcome.js';
import type { ClaimStatus } from '../ledger/ledger.js';
import type { AttributesLike, CounterLike, HistogramLike, MeterLike } from './otel-like.js';
import { ATTRIBUTES, LATENCY_BUCKETS_S, METRICS } from './telemetry-names.js';

/** What an outcome adds to the attributes of its counter: the kind, and the source or reason. */
function outcomeDetail(outcome: Outcome): string | undefined {
  switch (outcome.kind) {
    case 'duplicate':
    case 'busy':
      return outcome.source;
    case 'dead':
    case 'conflict':
      return outcome.reason;
    default:
      return undefined;
  }
}

/**
 * The instruments of one pipeline (one group). Attribute sets are built once per topic and outcome
 * and reused, so recording a delivery allocates nothing once they are known.
 */
export class PipelineInstruments {
  readonly #consumed: CounterLike;
  readonly #outcomes: CounterLike;
  readonly #process: HistogramLike;
  readonly #claim: HistogramLike;
  readonly #handler: HistogramLike;
  readonly #base: AttributesLike;
  readonly #cache = new Map<string, AttributesLike>();

  constructor(meter: MeterLike, group: string, system: string | undefined) {
    const latency = { unit: 's', advice: { explicitBucketBoundaries: [...LATENCY_BUCKETS_S] } };
    this.#consumed = meter.createCounter(METRICS.consumed, {
      description: 'Deliveries the pipeline took to an outcome',
      unit: '{message}',
    });
    this.#outcomes = meter.createCounter(METRICS.outcomes, {
      description: 'Outcomes of deliveries by kind, duplicate source and dead-letter reason',
      unit: '{message}',
    });
    this.#process = meter.createHistogram(METRICS.processDuration, {
      description: 'Time from taking a delivery to its outcome',
      ...latency,
    });
    this.#claim = meter.createHistogram(METRICS.claimDuration, {
      description: 'Time the ledger took to answer a claim',
      ...latency,
    });
    this.#handler = meter.createHistogram(METRICS.handlerDuration, {
      description: "Time the handler took to apply a message's effect",
      ...latency,
    });
    this.#base = {
      ...(system === undefined ? {} : { [ATTRIBUTES.system]: system }),
      [ATTRIBUTES.group]: group,
      [ATTRIBUTES.operationType]: 'process',
      [ATTRIBUTES.operationName]: 'process',
    };
  }

  /** The attributes of `topic` with `extra`, built once per distinct `id`. */
  #attributes(id: string, topic: string, extra: () => AttributesLike): AttributesLike {
    let attributes = this.#cache.get(id);
    if (attributes === undefined) {
      attributes = Object.freeze({ ...this.#base, [ATTRIBUTES.destination]: topic, ...extra() });
      this.#cache.set(id, attributes);
    }
    return attributes;
  }

  claim(topic: string, status: ClaimStatus, seconds: number): void {
    this.#claim.record(
      seconds,
      this.#attributes(`c\0${topic}\0${status}`, topic, () => ({ [ATTRIBUTES.claimStatus]: status })),
    );
  }

  handler(topic: string, errorType: string | undefined, seconds: number): void {
    this.#handler.record(
      seconds,
      this.#attributes(`h\0${topic}\0${errorType ?? ''}`, topic, () =>
        errorType === undefined ? {} : { [ATTRIBUTES.errorType]: errorType },
      ),
    );
  }

  outcome(outcome: Outcome, seconds: number): void {
    const { topic, kind } = outcome;
    const detail = outcomeDetail(outcome);
    this.#consumed.add(
      1,
      this.#attributes(`t\0${topic}`, topic, () => ({})),
    );
    const attributes = this.#attributes(`o\0${topic}\0${kind}\0${detail ?? ''}`, topic, () => ({
      [ATTRIBUTES.outcome]: kind,
      ...(kind === 'duplicate' || kind === 'busy' ? { [ATTRIBUTES.duplicateSource]: detail } : {}),
      ...(kind === 'dead' || kind === 'conflict' ? { [ATTRIBUTES.deadLetterReason]: detail } : {}),
    }));
    this.#outcomes.add(1, attributes);
    this.#process.record(
      seconds,
      this.#attributes(`p\0${topic}\0${kind}`, topic, () => ({ [ATTRIBUTES.outcome]: kind })),
    );
  }
}
