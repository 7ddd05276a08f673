import { KEY_HEADER, type Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { LocalFaultHooks } from '../transport/local/fault-hooks.js';

/** Every fault the injector knows, one per source of duplicates (and the poison message). */
export const FAULT_NAMES = [
  'producer-ack-loss',
  'consumer-ack-loss',
  'crash-after-commit',
  'rebalance',
  'handler-crash',
  'poison',
] as const;

export type FaultName = (typeof FAULT_NAMES)[number];

/**
 * Default rates: the chance that one decision point injects the fault. Message-level faults are asked
 * once per delivery (or send); `rebalance` once per pulled batch; `poison` once per published event.
 */
export const DEFAULT_FAULT_RATES: Readonly<Record<FaultName, number>> = Object.freeze({
  'producer-ack-loss': 0.02,
  'consumer-ack-loss': 0.02,
  'crash-after-commit': 0.001,
  rebalance: 0.005,
  'handler-crash': 0.02,
  poison: 0.002,
});

export interface FaultInjectorConfig {
  /** Same seed, same decisions. @default 1 */
  readonly seed?: number | string;
  /** Faults switched on. @default every fault in FAULT_NAMES */
  readonly faults?: readonly FaultName[];
  /** Rates overriding {@link DEFAULT_FAULT_RATES}, each in [0, 1]. */
  readonly rates?: Partial<Record<FaultName, number>>;
}

/** The error a `handler-crash` fault throws. */
export class InjectedFault extends Error {
  override name = 'InjectedFault' as const;
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
  faults: FaultName[];
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
 * Seeded, reproducible fault injection. Each decision is a counter-based random draw: a hash of the
 * seed, the fault, the subject (a business key) and how many times that fault was asked about that
 * subject. Decisions therefore do not depend on timing or on the order in which consumers
 * interleave: the same seed injects the same faults into the same messages.
 */
export class FaultInjector implements LocalFaultHooks {
  readonly seed: string;
  readonly rates: Readonly<Record<FaultName, number>>;
  readonly #enabled: ReadonlySet<FaultName>;
  readonly #asked = new Map<string, number>();
  readonly #counts: Record<FaultName, number>;

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

  /** Decides (and counts) one occurrence of `fault` for `subject`. */
  chance(fault: FaultName, subject: string): boolean {
    if (!this.#enabled.has(fault)) return false;
    const rate = this.rates[fault];
    if (rate <= 0) return false;
    const id = `${fault}\u0000${subject}`;
    const occurrence = this.#asked.get(id) ?? 0;
    this.#asked.set(id, occurrence + 1);
    const draw = hash32(`${this.seed}\u0000${id}\u0000${occurrence}`) / 0x1_0000_0000;
    if (draw >= rate) return false;
    this.#counts[fault]++;
    return true;
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
    return this.chance('producer-ack-loss', message.key ?? message.uniqueId);
  }

  consumerAckLost(envelope: Envelope): boolean {
    return this.chance('consumer-ack-loss', subjectOf(envelope));
  }

  crashAfterCommit(envelope: Envelope): boolean {
    return this.chance('crash-after-commit', subjectOf(envelope));
  }

  rebalance(envelope: Envelope): boolean {
    return this.chance('rebalance', subjectOf(envelope));
  }

  /** Call inside a handler after its (partial) write: throws {@link InjectedFault} when the fault fires. */
  handlerCrash(subject: string): void {
    if (this.chance('handler-crash', subject)) throw new InjectedFault('handler-crash', subject);
  }

  /** Whether the producer should publish a malformed (poison) message for `subject`. */
  poison(subject: string): boolean {
    return this.chance('poison', subject);
  }
}
