import type { DuplicateSource, Outcome } from '../core/outcome.js';

/** What a published key should end as. */
export type Expectation = 'effect' | 'dead-letter';

/** The checker's verdict. */
export interface EffectReport {
  /** Keys published. */
  readonly published: number;
  /** Effects recorded in all. */
  readonly effects: number;
  /**
   * Effects beyond what was expected: every effect past the first of a key, any effect of a key
   * expected to be dead-lettered (poison), and any effect of a key never published.
   */
  readonly doubleEffects: number;
  /**
   * Messages whose fate is unaccounted: a key expected to take effect with none, or a key expected
   * to be dead-lettered (poison) that has neither an effect nor a dead letter.
   */
  readonly lostEffects: number;
  /** Dead letters recorded, and by reason (summing to `deadLettered`). */
  readonly deadLettered: number;
  /** Dead letters recorded, by reason. */
  readonly deadLetterReasons: Readonly<Record<string, number>>;
  /**
   * The messages behind the dead letters, by reason: a key dead-lettered again (a copy the producer
   * resent, or one a crash replayed) counts once; a dead letter without a key counts alone.
   */
  readonly deadLetterMessages: Readonly<Record<string, number>>;
  /** Copies absorbed (acked or retried without effect), by where they came from. */
  readonly duplicates: Readonly<Record<DuplicateSource, number>>;
  /** Up to `sample` keys with double effects and lost effects, for the error message. */
  readonly doubleKeys: readonly string[];
  /** Up to `sample` keys with lost effects. */
  readonly lostKeys: readonly string[];
  /** No double effect and no lost effect: the exactly-once effect held. */
  readonly ok: boolean;
}

/**
 * Counts effects per key against the keys published, and tells double effects from lost ones.
 * Record effects where they become durable (after the commit, or read back from the database at
 * the end), dead letters from the dead-letter queue, duplicates from the pipeline's outcomes.
 */
export class EffectChecker {
  readonly #expected = new Map<string, Expectation>();
  readonly #effects = new Map<string, number>();
  readonly #deadLetters = new Map<string, string[]>();
  readonly #reasons: Record<string, number> = {};
  readonly #reasonKeys = new Map<string, Set<string>>();
  readonly #keyless: Record<string, number> = {};
  readonly #duplicates: Record<DuplicateSource, number> = { redelivery: 0, republish: 0, concurrent: 0 };
  #deadLettered = 0;

  /** A key was published; `dead-letter` for a message that can never succeed (poison). */
  published(key: string, expect: Expectation = 'effect'): void {
    this.#expected.set(key, expect);
  }

  /** The effect of `key` was applied (durably) `count` times. */
  effect(key: string, count = 1): void {
    this.#effects.set(key, (this.#effects.get(key) ?? 0) + count);
  }

  /** A message was dead-lettered; `key` null when it had none readable. */
  deadLettered(key: string | null, reason: string): void {
    this.#deadLettered++;
    this.#reasons[reason] = (this.#reasons[reason] ?? 0) + 1;
    if (key === null) {
      this.#keyless[reason] = (this.#keyless[reason] ?? 0) + 1;
      return;
    }
    this.#deadLetters.set(key, [...(this.#deadLetters.get(key) ?? []), reason]);
    const keys = this.#reasonKeys.get(reason) ?? new Set<string>();
    this.#reasonKeys.set(reason, keys.add(key));
  }

  /** A copy was absorbed without effect. */
  duplicate(source: DuplicateSource): void {
    this.#duplicates[source]++;
  }

  /** Feeds a pipeline outcome (`onOutcome`): counts absorbed duplicates by source. */
  observe(outcome: Outcome): void {
    if (outcome.kind === 'duplicate' || outcome.kind === 'busy') this.duplicate(outcome.source);
  }

  /** The verdict so far, naming up to `sample` keys of each kind of failure. */
  report(sample = 20): EffectReport {
    let effects = 0;
    let doubleEffects = 0;
    const doubleKeys: string[] = [];
    for (const [key, count] of this.#effects) {
      effects += count;
      const allowed = this.#expected.get(key) === 'effect' ? 1 : 0;
      if (count > allowed) {
        doubleEffects += count - allowed;
        if (doubleKeys.length < sample) doubleKeys.push(key);
      }
    }
    let lostEffects = 0;
    const lostKeys: string[] = [];
    for (const [key, expect] of this.#expected) {
      const applied = (this.#effects.get(key) ?? 0) > 0;
      const lost = expect === 'effect' ? !applied : !applied && !this.#deadLetters.has(key);
      if (lost) {
        lostEffects++;
        if (lostKeys.length < sample) lostKeys.push(key);
      }
    }
    return {
      published: this.#expected.size,
      effects,
      doubleEffects,
      lostEffects,
      deadLettered: this.#deadLettered,
      deadLetterReasons: { ...this.#reasons },
      deadLetterMessages: Object.fromEntries(
        Object.keys(this.#reasons).map((reason) => [
          reason,
          (this.#reasonKeys.get(reason)?.size ?? 0) + (this.#keyless[reason] ?? 0),
        ]),
      ),
      duplicates: { ...this.#duplicates },
      doubleKeys,
      lostKeys,
      ok: doubleEffects === 0 && lostEffects === 0,
    };
  }
}
