import type { PipelineMetrics } from '../consumer/metrics.js';
import type { DuplicateSource } from '../core/outcome.js';
import type { Ledger } from '../ledger/ledger.js';
import type { DeadLetters } from '../transport/dead-letters.js';
import type { EffectChecker, EffectReport } from '../testing/effect-checker.js';
import type { FaultInjector, FaultName } from '../testing/fault-injector.js';
import { DEMO_GROUP, POINTS_PER_EVENT } from './demo-consumer.js';
import type { DemoStore } from './demo-store.js';

export interface DemoOptions {
  readonly events: number;
  readonly users: number;
  readonly consumers: number;
  readonly faults: readonly FaultName[];
  readonly rates: Partial<Record<FaultName, number>>;
  readonly seed: string;
  readonly store: string;
  /** Server of a postgres, mysql or tiered (Redis) store. */
  readonly url?: string;
  readonly transport: string;
  /** The broker of a transport other than `local` (default: its environment variable, else loopback). */
  readonly brokerUrl?: string;
  readonly naive: boolean;
  /** Called now and then while consumers work. */
  readonly onProgress?: (done: number, total: number) => void;
  /** Someone watching the run as it goes (`--dashboard`). */
  readonly live?: DemoLive;
}

/** What a watcher of a running demo can read: its ledger, its dead letters and its consumer's counters. */
export interface DemoView {
  readonly ledger: Ledger;
  readonly deadLetters: DeadLetters;
  readonly transport: string;
  readonly group: string;
  /** The pipeline's counters; `undefined` for the naive consumer, which has none. */
  metrics(): PipelineMetrics | undefined;
}

/** Hooks of a watched run. */
export interface DemoLive {
  /** The consumers are subscribed; publishing starts when this resolves. */
  started(view: DemoView): Promise<void>;
  /**
   * The effects were checked. One consumer of the group stays subscribed (a replayed dead letter is
   * delivered again) until this resolves; then the run's broker and store are closed.
   */
  finished(result: DemoResult): Promise<void>;
}

export interface DemoResult {
  events: number;
  poison: number;
  users: number;
  consumers: number;
  deliveries: number;
  effects: number;
  duplicates: Record<DuplicateSource, number>;
  deadLettered: number;
  /** Dead letters per reason, summing to `deadLettered`. */
  deadLetterReasons: Record<string, number>;
  /** The messages behind the dead letters, per reason: a copy dead-lettered again counts once. */
  deadLetterMessages: Record<string, number>;
  doubleEffects: number;
  lostEffects: number;
  usersWithWrongPoints: number;
  /** SUCCESS ledger rows of the group (null for --naive, which has no ledger). */
  ledgerRows: number | null;
  /** Duplicates answered from Redis and claims that went on to SQL (`--store tiered`; else null). */
  cache: { hits: number; misses: number; writes: number } | null;
  /** Faults injected, by name (the payments scenario has no outbox relay, so no `relay-crash`). */
  faults: Partial<Record<FaultName, number>>;
  /** Broker connections dropped through the proxy (0 on the local broker, which has none). */
  connectionDrops: number;
  seed: string;
  naive: boolean;
  ok: boolean;
  store: string;
  transport: string;
  elapsedMs: number;
  messagesPerSecond: number;
  doubleKeys: readonly string[];
  lostKeys: readonly string[];
}

/** What a finished run hands over to be checked. */
export interface DemoTally {
  readonly store: DemoStore;
  readonly checker: EffectChecker;
  readonly injector: FaultInjector;
  readonly users: readonly string[];
  /** Points each user should have. */
  readonly expected: ReadonlyMap<string, number>;
  readonly poison: number;
  readonly deliveries: number;
  readonly connectionDrops: number;
  readonly elapsedMs: number;
}

/** Expected points per user when event `index` goes to `users[index % users.length]`. */
export function expectedPoints(users: readonly string[], events: number): Map<string, number> {
  const expected = new Map<string, number>();
  for (let index = 0; index < events; index++) {
    const user = users[index % users.length] ?? 'user-0';
    expected.set(user, (expected.get(user) ?? 0) + POINTS_PER_EVENT);
  }
  return expected;
}

/** What the effect checker found, as the summary gives it. */
export function effectFields(
  report: EffectReport,
): Pick<
  DemoResult,
  | 'effects'
  | 'duplicates'
  | 'deadLettered'
  | 'deadLetterReasons'
  | 'deadLetterMessages'
  | 'doubleEffects'
  | 'lostEffects'
> {
  return {
    effects: report.effects,
    duplicates: { ...report.duplicates },
    deadLettered: report.deadLettered,
    deadLetterReasons: { ...report.deadLetterReasons },
    deadLetterMessages: { ...report.deadLetterMessages },
    doubleEffects: report.doubleEffects,
    lostEffects: report.lostEffects,
  };
}

/** The fault counts of the payments scenario: all but `relay-crash` (it has no outbox relay). */
function paymentFaults(injector: FaultInjector): DemoResult['faults'] {
  const faults: DemoResult['faults'] = injector.counts();
  delete faults['relay-crash'];
  return faults;
}

/**
 * Reads the effects back from the database (grant rows per event, balances, ledger rows), gives
 * them to the checker with the dead letters it already has, and builds the summary.
 */
export async function demoResult(options: DemoOptions, tally: DemoTally): Promise<DemoResult> {
  const { store, checker } = tally;
  for (const [key, count] of await store.grantsPerEvent()) checker.effect(key, count);
  const balances = await store.balances();
  const usersWithWrongPoints = tally.users.filter(
    (user) => (balances.get(user) ?? 0) !== (tally.expected.get(user) ?? 0),
  ).length;
  const ledgerRows = options.naive ? null : await store.ledgerRows(DEMO_GROUP);
  const cache = store.cacheMetrics?.();
  const report = checker.report();
  return {
    events: options.events,
    poison: tally.poison,
    users: options.users,
    consumers: options.consumers,
    deliveries: tally.deliveries,
    ...effectFields(report),
    usersWithWrongPoints,
    ledgerRows,
    cache:
      cache === undefined || options.naive
        ? null
        : { hits: cache.hits, misses: cache.misses, writes: cache.writes },
    faults: paymentFaults(tally.injector),
    connectionDrops: tally.connectionDrops,
    seed: options.seed,
    naive: options.naive,
    ok: report.ok && usersWithWrongPoints === 0 && (ledgerRows === null || ledgerRows === options.events),
    store: options.store,
    transport: options.transport,
    elapsedMs: Math.round(tally.elapsedMs),
    messagesPerSecond: Math.round((tally.deliveries * 1000) / Math.max(1, tally.elapsedMs)),
    doubleKeys: report.doubleKeys,
    lostKeys: report.lostKeys,
  };
}
