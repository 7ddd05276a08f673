import type { DuplicateSource, Outcome, OutcomeKind } from '../core/outcome.js';

/** Counters a pipeline keeps: outcomes by kind, duplicates by source, dead letters by reason. */
export interface PipelineMetrics {
  /** Deliveries that reached an outcome since the pipeline was created. */
  readonly deliveries: number;
  /** Outcomes by `kind` (`executed`, `duplicate`, `busy`, `conflict`, `retry`, `dead`). */
  readonly outcomes: Readonly<Record<OutcomeKind, number>>;
  /** `duplicate` and `busy` outcomes by source: `redelivery`, `republish`, `concurrent`. */
  readonly duplicates: Readonly<Record<DuplicateSource, number>>;
  /** Dead-lettered deliveries (`conflict` and `dead` outcomes) by reason. */
  readonly deadLettered: Readonly<Record<string, number>>;
  /** Executions that took over an expired lease or a failed attempt. */
  readonly reclaimed: number;
}

/** Mutable counters behind {@link PipelineMetrics}. */
export class OutcomeCounters {
  #deliveries = 0;
  #reclaimed = 0;
  readonly #outcomes: Record<OutcomeKind, number> = {
    executed: 0,
    duplicate: 0,
    busy: 0,
    conflict: 0,
    retry: 0,
    dead: 0,
  };
  readonly #duplicates: Record<DuplicateSource, number> = { redelivery: 0, republish: 0, concurrent: 0 };
  readonly #deadLettered: Record<string, number> = {};

  record(outcome: Outcome): void {
    this.#deliveries++;
    this.#outcomes[outcome.kind]++;
    switch (outcome.kind) {
      case 'duplicate':
      case 'busy':
        this.#duplicates[outcome.source]++;
        break;
      case 'conflict':
      case 'dead':
        this.#deadLettered[outcome.reason] = (this.#deadLettered[outcome.reason] ?? 0) + 1;
        break;
      case 'executed':
        if (outcome.reclaimed) this.#reclaimed++;
        break;
      case 'retry':
        break;
    }
  }

  snapshot(): PipelineMetrics {
    return {
      deliveries: this.#deliveries,
      outcomes: { ...this.#outcomes },
      duplicates: { ...this.#duplicates },
      deadLettered: { ...this.#deadLettered },
      reclaimed: this.#reclaimed,
    };
  }
}
