import type { AttributesLike, MeterLike, ObservableResultLike } from './otel-like.js';
import { METRICS } from './telemetry-names.js';

/** One counted series: its attributes, its running count, and an id equal for equal attributes. */
export interface CounterSeries {
  readonly id: string;
  readonly attributes: AttributesLike;
  value: number;
}

/**
 * The delivery and outcome counters of every pipeline reporting to one meter, kept in process and
 * reported as observable counters at each collection. Counting is an increment of a series the
 * pipeline holds: the SDK's per-call attribute hashing (about a microsecond per attribute, measured)
 * is paid per collection, not per delivery. One store per meter, so that pipelines of the same group
 * add up instead of overwriting each other's series.
 */
export class OutcomeCounterStore {
  readonly #consumed: CounterSeries[] = [];
  readonly #outcomes: CounterSeries[] = [];

  constructor(meter: MeterLike) {
    const counter = (name: string, description: string, all: CounterSeries[]) => {
      meter
        .createObservableCounter(name, { description, unit: '{message}' })
        .addCallback((result: ObservableResultLike) => {
          const sums = new Map<string, { attributes: AttributesLike; value: number }>();
          for (const { id, attributes, value } of all) {
            const sum = sums.get(id);
            if (sum === undefined) sums.set(id, { attributes, value });
            else sum.value += value;
          }
          for (const { attributes, value } of sums.values()) result.observe(value, attributes);
        });
    };
    counter(METRICS.consumed, 'Deliveries the pipeline took to an outcome', this.#consumed);
    counter(
      METRICS.outcomes,
      'Outcomes of deliveries by kind, duplicate source and dead-letter reason',
      this.#outcomes,
    );
  }

  /** A new series of the delivery counter (attributes as `JSON.stringify` orders them). */
  consumed(attributes: AttributesLike): CounterSeries {
    return push(this.#consumed, attributes);
  }

  /** A new series of the outcome counter. */
  outcome(attributes: AttributesLike): CounterSeries {
    return push(this.#outcomes, attributes);
  }
}

function push(all: CounterSeries[], attributes: AttributesLike): CounterSeries {
  const series = { id: JSON.stringify(attributes), attributes, value: 0 };
  all.push(series);
  return series;
}

const stores = new WeakMap<MeterLike, OutcomeCounterStore>();

/** The counter store of `meter`, made on first use. */
export function outcomeCountersOf(meter: MeterLike): OutcomeCounterStore {
  let store = stores.get(meter);
  if (store === undefined) {
    store = new OutcomeCounterStore(meter);
    stores.set(meter, store);
  }
  return store;
}
