import { KEY_HEADER, type Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { LocalFaultHooks } from '../transport/local/local-fault-hooks.js';

/** Every fault the injector knows, one per source of duplicates (and the poison message). */
export const FAULT_NAMES = [
  'producer-ack-loss',
  'consumer-ack-loss',
  'crash-after-commit',
  'rebalance',
  'handler-crash',
  'commit-failure',
  'poison',
  'relay-crash',
] as const;

/** One of {@link FAULT_NAMES}: a fault the injector can inject. */
export type FaultName = (typeof FAULT_NAMES)[number];

/**
 * Default rates: the chance that one decision injects the fault. `producer-ack-loss` is decided per
 * send; `consumer-ack-loss`, `crash-after-commit` and `rebalance` once per stored copy of an event;
 * `handler-crash` and `commit-failure` per handler run of a key; `poison` once per published event;
 * `relay-crash` per publish of an outbox row by a relay.
 */
export const DEFAULT_FAULT_RATES: Readonly<Record<FaultName, number>> = Object.freeze({
  'producer-ack-loss': 0.02,
  'consumer-ack-loss': 0.02,
  'crash-after-commit': 0.001,
  rebalance: 0.005,
  'handler-crash': 0.02,
  'commit-failure': 0.01,
  poison: 0.002,
  'relay-crash': 0.01,
});

/** Input of `new FaultInjector(config)`: the seed, and which faults at which rates. */
export interface FaultInjectorConfig {
  /** Same seed, same decisions. @default 1 */
  readonly seed?: number | string;
  /** Faults switched on. @default every fault in FAULT_NAMES */
  readonly faults?: readonly FaultName[];
  /** Rates overriding {@link DEFAULT_FAULT_RATES}, each in [0, 1]. @default DEFAULT_FAULT_RATES */
  readonly rates?: Partial<Record<FaultName, number>>;
}

/** The error an injected `handler-crash` throws, and the cause of an injected `commit-failure`. */
export class InjectedFault extends Error {
  /** Always `'InjectedFault'`. */
  override name = 'InjectedFault' as const;
  /** The fault injected: `handler-crash` or `commit-failure`. */
  readonly fault: FaultName;

  constructor(fault: FaultName, subject: string) {
    super(`injected fault ${fault} on ${subject}`);
    this.fault = fault;
  }
}

/** FNV-1a over the text, then a murmur3 finalizer: a well-mixed 32-bit value. */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Reads `all`, `none`, or `name[=rate],name…` (the demo's `--faults`). */
export function parseFaults(text: string): {
  /** The faults named, to switch on. */
  faults: FaultName[];
  /** The rates given with `name=rate`; the others keep their default. */
  rates: Partial<Record<FaultName, number>>;
} {
  const trimmed = text.trim();
  if (trimmed === 'all') return { faults: [...FAULT_NAMES], rates: {} };
  if (trimmed === 'none' || trimmed === '') return { faults: [], rates: {} };
  const faults: FaultName[] = [];
  const rates: Partial<Record<FaultName, number>> = {};
  for (const part of trimmed.split(',')) {
    const [name = '', rate] = part.trim().split('=');
    if (!(FAULT_NAMES as readonly string[]).includes(name)) {
      throw new ConfigError(
        'faults',
        `unknown fault '${name}'; use all, none, or some of ${FAULT_NAMES.join(', ')}`,
      );
    }
    faults.push(name as FaultName);
    if (rate !== undefined) {
      const value = Number(rate);
      if (!(value >= 0 && value <= 1))
        throw new ConfigError('faults', `rate of ${name} must be in [0, 1], got '${rate}'`);
      rates[name as FaultName] = value;
    }
  }
  return { faults, rates };
}

const subjectOf = (envelope: Envelope): string => envelope.headers[KEY_HEADER] ?? envelope.brokerId;

/**
 * Seeded, reproducible fault injection. Every decision is a pure function of the seed, the fault and
 * the event it is about — never of timing, delivery order, broker ids or how often a copy came back:
 *
 * - `producer-ack-loss`: the key and the send attempt;
 * - `consumer-ack-loss`, `crash-after-commit`, `rebalance`: the key and the stored copy. Each copy is
 *   decided once, when it first reaches the decision point (a lost ack's redelivery is not faulted
 *   again), and a key gets as many decisions as the producer stored copies of it (one, plus one per
 *   lost confirm); copies are numbered in the order they arrive, so which copy is faulted may vary
 *   while the faults injected do not;
 * - `handler-crash`, `commit-failure`: the key and the ledger attempt of the claim (see
 *   {@link FaultInjector.atAttempt}), so a batch rolled back by another key and run again one delivery
 *   at a time gets the same answers; a handler crash without an attempt (no ledger) draws per run;
 * - `poison`: the key.
 *
 * What still depends on timing is what a fault sets off (how much a crash replays) and where
 * `rebalance` is asked: at the middle delivery of each pulled batch, and batches form with timing.
 */
export class FaultInjector implements LocalFaultHooks {
  /** The seed, as text: the same seed makes the same decisions. */
  readonly seed: string;
  /** The rate of every fault, defaults and overrides merged. */
  readonly rates: Readonly<Record<FaultName, number>>;
  readonly #enabled: ReadonlySet<FaultName>;
  readonly #asked = new Map<string, number>();
  /** Copies the producer stored per key: the number of decisions a copy-level fault makes for it. */
  readonly #stored = new Map<string, number>();
  /** Broker ids of the copies already decided, per fault and key. */
  readonly #decided = new Map<string, Set<string>>();
  readonly #counts: Record<FaultName, number>;
  /** Per fault, key and ledger attempt: the draws made and the last answer (see {@link atAttempt}). */
  readonly #attempts = new Map<string, { draws: number; last: boolean }>();

  constructor(config: FaultInjectorConfig = {}) {
    this.seed = String(config.seed ?? 1);
    const enabled = config.faults ?? FAULT_NAMES;
    for (const name of enabled) {
      if (!(FAULT_NAMES as readonly string[]).includes(name))
        throw new ConfigError('faults', `unknown fault '${name}'`);
    }
    this.#enabled = new Set(enabled);
    const rates = { ...DEFAULT_FAULT_RATES, ...config.rates };
    for (const [name, rate] of Object.entries(rates)) {
      if (!(rate >= 0 && rate <= 1)) throw new ConfigError(`rates.${name}`, `must be in [0, 1], got ${rate}`);
    }
    this.rates = Object.freeze(rates);
    this.#counts = Object.fromEntries(FAULT_NAMES.map((name) => [name, 0])) as Record<FaultName, number>;
  }

  /** Whether `fault` is switched on. */
  enabled(fault: FaultName): boolean {
    return this.#enabled.has(fault);
  }

  /** The `index`-th decision of `fault` for `subject`: a hash of the seed and those three, below the rate. */
  #draw(fault: FaultName, subject: string, index: number): boolean {
    if (!this.#enabled.has(fault)) return false;
    const rate = this.rates[fault];
    if (rate <= 0) return false;
    const draw = hash32(`${this.seed}\u0000${fault}\u0000${subject}\u0000${index}`) / 0x1_0000_0000;
    if (draw >= rate) return false;
    this.#counts[fault]++;
    return true;
  }

  /**
   * Decides (and counts) the next occurrence of `fault` for `subject`: the n-th call for a subject
   * draws its n-th decision, so a subject asked again is not doomed to the same answer.
   */
  chance(fault: FaultName, subject: string): boolean {
    if (!this.#enabled.has(fault)) return false;
    const id = `${fault}\u0000${subject}`;
    const occurrence = this.#asked.get(id) ?? 0;
    this.#asked.set(id, occurrence + 1);
    return this.#draw(fault, subject, occurrence);
  }

  /**
   * Decides `fault` for `subject` at a ledger attempt (`ctx.attempt`, the claim's attempt), so that a
   * run repeated without a new attempt — a batch rolled back by another key's failure and run again
   * one delivery at a time — gets the same answer, however batches formed:
   * - `sticky`: one decision per attempt; asked again at that attempt, it answers the same (and counts
   *   once). A fired handler crash is recorded as a failed attempt, so the next run is a new attempt.
   * - otherwise a "no" holds for the attempt and a fired decision is followed by the next draw: a
   *   commit failure is not recorded as a failed attempt (it is an outage), so the redelivery asks at
   *   the same attempt and must be able to pass.
   */
  atAttempt(fault: FaultName, subject: string, attempt: number, sticky: boolean): boolean {
    if (!this.#enabled.has(fault)) return false;
    const id = `${fault}\u0000${subject}\u0000${attempt}`;
    const state = this.#attempts.get(id);
    if (state !== undefined && (sticky || !state.last)) return state.last;
    const draws = state?.draws ?? 0;
    const last = this.#draw(fault, `${subject}\u0000${attempt}`, draws);
    this.#attempts.set(id, { draws: draws + 1, last });
    return last;
  }

  /** Decides a copy-level fault once per stored copy of the envelope's event (see the class comment). */
  #perCopy(fault: FaultName, envelope: Envelope): boolean {
    if (!this.#enabled.has(fault)) return false;
    const key = subjectOf(envelope);
    const id = `${fault}\u0000${key}`;
    let decided = this.#decided.get(id);
    if (decided === undefined) this.#decided.set(id, (decided = new Set()));
    if (decided.has(envelope.brokerId)) return false;
    // Replays can bring more copies than the producer stored (a retried copy replayed by a crash):
    // those extra ones are not decided, so the decisions made do not depend on how much was replayed.
    if (decided.size >= (this.#stored.get(key) ?? Number.POSITIVE_INFINITY)) return false;
    decided.add(envelope.brokerId);
    return this.#draw(fault, key, decided.size - 1);
  }

  /** Faults injected so far, by name. */
  counts(): Record<FaultName, number> {
    return { ...this.#counts };
  }

  producerAckLost(message: {
    readonly key: string | undefined;
    readonly uniqueId: string;
    readonly attempt: number;
  }): boolean {
    const subject = message.key ?? message.uniqueId;
    const lost = this.#draw('producer-ack-loss', subject, message.attempt - 1);
    // The first send stores a copy; a lost confirm makes the producer store another.
    const added = (message.attempt === 1 ? 1 : 0) + (lost ? 1 : 0);
    this.#stored.set(subject, (this.#stored.get(subject) ?? 0) + added);
    return lost;
  }

  consumerAckLost(envelope: Envelope): boolean {
    return this.#perCopy('consumer-ack-loss', envelope);
  }

  crashAfterCommit(envelope: Envelope): boolean {
    return this.#perCopy('crash-after-commit', envelope);
  }

  rebalance(envelope: Envelope): boolean {
    return this.#perCopy('rebalance', envelope);
  }

  /**
   * Call inside a handler after its (partial) write: throws {@link InjectedFault} when the fault fires.
   * Give the claim's `attempt` (`ctx.attempt`) where there is a ledger: the decision is then one per
   * attempt, the same however batches formed; without it, the n-th run of a subject draws the n-th.
   */
  handlerCrash(subject: string, attempt?: number): void {
    const fired =
      attempt === undefined
        ? this.chance('handler-crash', subject)
        : this.atAttempt('handler-crash', subject, attempt, true);
    if (fired) throw new InjectedFault('handler-crash', subject);
  }

  /**
   * Whether the commit of `key`'s transaction (or its leased completion) at ledger attempt `attempt`
   * fails after the handler succeeded. `injectCommitFailures(ledger, injector)` asks it, with the
   * claim's attempt: a "no" holds for the attempt (a batch run again one by one asks again), a failure
   * is followed by the next decision at the next commit.
   */
  commitFailure(key: string, attempt: number): boolean {
    return this.atAttempt('commit-failure', key, attempt, false);
  }

  /**
   * Whether an outbox relay dies between publish and mark (`kill -9`) at the row of business key
   * `subject`: before publishing it, after the earlier rows of its round went out, or right after its
   * confirm when it is the first of its round. The n-th publish of a row draws its n-th decision.
   */
  relayCrash(subject: string): boolean {
    return this.chance('relay-crash', subject);
  }

  /** Whether the producer should publish a malformed (poison) message for `subject`. */
  poison(subject: string): boolean {
    return this.chance('poison', subject);
  }
}
