import type { Outcome } from '../core/outcome.js';
import type { ClaimStatus } from '../ledger/ledger.js';
import type { AttributesLike, HistogramLike, MeterLike } from './otel-like.js';
import { outcomeCountersOf, type CounterSeries, type OutcomeCounterStore } from './outcome-counters.js';

/** The counters of one topic of a pipeline. */
interface TopicSeries {
  readonly attributes: AttributesLike;
  readonly consumed: CounterSeries;
  /** By outcome kind and detail (`dead:malformed`). */
  readonly outcomes: Map<string, CounterSeries>;
}
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
 * The instruments of one pipeline (one group). The counters carry the full messaging attributes
 * (system, group, destination, operation) and are counted in process, for every delivery; the
 * histograms, recorded through the SDK for the deliveries the latency sample takes, carry the group
 * and one attribute that splits them (outcome, claim status, error type), because the SDK hashes
 * every attribute of every recording.
 */
export class PipelineInstruments {
  readonly #counters: OutcomeCounterStore;
  readonly #process: HistogramLike;
  readonly #claim: HistogramLike;
  readonly #handler: HistogramLike;
  readonly #group: string;
  readonly #base: AttributesLike;
  readonly #cache = new Map<string, Map<string | undefined, AttributesLike>>();
  readonly #topics = new Map<string, TopicSeries>();

  constructor(meter: MeterLike, group: string, system: string | undefined) {
    const latency = { unit: 's', advice: { explicitBucketBoundaries: [...LATENCY_BUCKETS_S] } };
    this.#counters = outcomeCountersOf(meter);
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
    this.#group = group;
    this.#base = {
      ...(system === undefined ? {} : { [ATTRIBUTES.system]: system }),
      [ATTRIBUTES.group]: group,
      [ATTRIBUTES.operationType]: 'process',
      [ATTRIBUTES.operationName]: 'process',
    };
  }

  /** The group's attributes with `name: value`, built once per distinct value. */
  #split(name: string, value: string | undefined): AttributesLike {
    let byValue = this.#cache.get(name);
    if (byValue === undefined)
      this.#cache.set(name, (byValue = new Map<string | undefined, AttributesLike>()));
    let attributes = byValue.get(value);
    if (attributes === undefined) {
      attributes = Object.freeze({
        [ATTRIBUTES.group]: this.#group,
        ...(value === undefined ? {} : { [name]: value }),
      });
      byValue.set(value, attributes);
    }
    return attributes;
  }

  claim(status: ClaimStatus, seconds: number): void {
    this.#claim.record(seconds, this.#split(ATTRIBUTES.claimStatus, status));
  }

  handler(errorType: string | undefined, seconds: number): void {
    this.#handler.record(seconds, this.#split(ATTRIBUTES.errorType, errorType));
  }

  /** The counter series of `topic`, made on its first delivery. */
  #topic(topic: string): TopicSeries {
    let series = this.#topics.get(topic);
    if (series === undefined) {
      const attributes = Object.freeze({ ...this.#base, [ATTRIBUTES.destination]: topic });
      series = { attributes, consumed: this.#counters.consumed(attributes), outcomes: new Map() };
      this.#topics.set(topic, series);
    }
    return series;
  }

  /** Counts the outcome (always) and, when `seconds` is given, records the delivery's duration. */
  outcome(outcome: Outcome, seconds: number | undefined): void {
    const { kind } = outcome;
    const detail = outcomeDetail(outcome);
    const topic = this.#topic(outcome.topic);
    topic.consumed.value++;
    const id = detail === undefined ? kind : `${kind}:${detail}`;
    let counted = topic.outcomes.get(id);
    if (counted === undefined) {
      counted = this.#counters.outcome(
        Object.freeze({
          ...topic.attributes,
          [ATTRIBUTES.outcome]: kind,
          ...(kind === 'duplicate' || kind === 'busy' ? { [ATTRIBUTES.duplicateSource]: detail } : {}),
          ...(kind === 'dead' || kind === 'conflict' ? { [ATTRIBUTES.deadLetterReason]: detail } : {}),
        }),
      );
      topic.outcomes.set(id, counted);
    }
    counted.value++;
    if (seconds !== undefined) this.#process.record(seconds, this.#split(ATTRIBUTES.outcome, kind));
  }
}
