import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EffectChecker } from '../testing/effect-checker.js';
import { FaultInjector, type FaultName } from '../testing/fault-injector.js';
import { expectedPoints, type DemoOptions, type DemoResult } from './demo-result.js';
import { openRunStore, type DemoStore } from './demo-store.js';
import { WebhookReceivers, WEBHOOKS_GROUP, type PaymentWebhook } from './demo-webhooks-receiver.js';
import { WebhookSender, type SenderCounts, type WebhookDelivery } from './demo-webhooks-sender.js';

/**
 * The faults of the webhooks scenario, each with what it does over HTTP; the other faults of the
 * injector (rebalance, poison, relay-crash) have no part in it and are left out of its counts.
 */
export const WEBHOOKS_FAULTS = [
  'producer-ack-loss',
  'consumer-ack-loss',
  'crash-after-commit',
  'handler-crash',
  'commit-failure',
] as const satisfies readonly FaultName[];

/**
 * Rates of the webhooks scenario that differ from the injector's defaults: a receiver is killed after
 * one 2xx answer in 100, not one in 1000, so that a run of a few hundred deliveries sees kills.
 */
export const WEBHOOKS_FAULT_RATES: Readonly<Partial<Record<FaultName, number>>> = Object.freeze({
  'crash-after-commit': 0.01,
});

/**
 * The summary of `oncemq demo --scenario webhooks`: the payments fields of the effects and the store,
 * plus the sender's and the receivers' own.
 */
export type WebhooksResult = Pick<
  DemoResult,
  | 'events'
  | 'users'
  | 'deliveries'
  | 'effects'
  | 'duplicates'
  | 'doubleEffects'
  | 'lostEffects'
  | 'usersWithWrongPoints'
  | 'ledgerRows'
  | 'cache'
  | 'faults'
  | 'seed'
  | 'naive'
  | 'ok'
  | 'store'
  | 'elapsedMs'
  | 'doubleKeys'
  | 'lostKeys'
> & {
  scenario: 'webhooks';
  /** Receivers (`--consumers`). */
  receivers: number;
  /** What the sender saw: requests, retries by cause, resends, deliveries given up. */
  sender: SenderCounts;
  /** Receivers killed after a commit and started again. */
  receiverRestarts: number;
  /** Requests the receivers got per second. */
  deliveriesPerSecond: number;
};

/** How long the run waits, after the sender is done, for requests a killed receiver still runs. */
const SETTLE_MS = 10_000;

/**
 * The webhooks scenario: a Standard Webhooks sender delivers one `payment.succeeded` event per
 * `--events` to `--consumers` node:http receivers behind the HTTP edge (or, `--naive`, without it),
 * retrying on timeouts, 5xx and reset connections, while the injector kills receivers after their
 * commit, drops their answers, crashes handlers, fails commits and makes the sender resend. Then
 * every effect is read back from the database and checked against the events sent.
 */
export async function runWebhooksDemo(options: DemoOptions): Promise<WebhooksResult> {
  const dir = mkdtempSync(join(tmpdir(), 'oncemq-webhooks-'));
  const injector = new FaultInjector({
    seed: options.seed,
    faults: options.faults,
    rates: { ...WEBHOOKS_FAULT_RATES, ...options.rates },
  });
  let store: DemoStore | undefined;
  let receivers: WebhookReceivers | undefined;
  try {
    const runStore = await openRunStore(options, dir, options.consumers + 2);
    store = runStore.store;
    const users = runStore.users;
    const checker = new EffectChecker();
    receivers = new WebhookReceivers(options.consumers, store, injector, checker, options.naive);
    await receivers.start();
    const deliveries: WebhookDelivery[] = [];
    for (let index = 0; index < options.events; index++) {
      const eventId = `evt-${index}`;
      const userId = users[index % users.length] ?? 'user-0';
      const event: PaymentWebhook = { type: 'payment.succeeded', data: { eventId, userId, amount: 100 } };
      deliveries.push({ id: eventId, body: JSON.stringify(event) });
      checker.published(eventId);
    }
    const live = receivers;
    const sender = new WebhookSender(() => live.urls(), injector);
    const started = performance.now();
    let done = 0;
    try {
      await sender.deliverAll(deliveries, () => options.onProgress?.(++done, deliveries.length));
    } finally {
      sender.close();
    }
    const settle = Date.now() + SETTLE_MS;
    while (receivers.running() > 0 && Date.now() < settle) await sleep(20);
    const elapsedMs = performance.now() - started;
    await receivers.close();
    for (const [key, count] of await store.grantsPerEvent()) checker.effect(key, count);
    const balances = await store.balances();
    const expected = expectedPoints(users, options.events);
    const usersWithWrongPoints = users.filter(
      (user) => (balances.get(user) ?? 0) !== (expected.get(user) ?? 0),
    ).length;
    const ledgerRows = options.naive ? null : await store.ledgerRows(WEBHOOKS_GROUP);
    const cache = options.naive ? undefined : store.cacheMetrics?.();
    const counts = injector.counts();
    const report = checker.report();
    return {
      scenario: 'webhooks',
      events: options.events,
      users: options.users,
      receivers: options.consumers,
      deliveries: receivers.deliveries(),
      effects: report.effects,
      duplicates: { ...report.duplicates },
      doubleEffects: report.doubleEffects,
      lostEffects: report.lostEffects,
      usersWithWrongPoints,
      ledgerRows,
      cache: cache === undefined ? null : { hits: cache.hits, misses: cache.misses, writes: cache.writes },
      faults: Object.fromEntries(WEBHOOKS_FAULTS.map((name) => [name, counts[name]])),
      sender: { ...sender.counts },
      receiverRestarts: receivers.kills(),
      seed: options.seed,
      naive: options.naive,
      ok: report.ok && usersWithWrongPoints === 0 && (ledgerRows === null || ledgerRows === options.events),
      store: options.store,
      elapsedMs: Math.round(elapsedMs),
      deliveriesPerSecond: Math.round((receivers.deliveries() * 1000) / Math.max(1, elapsedMs)),
      doubleKeys: report.doubleKeys,
      lostKeys: report.lostKeys,
    };
  } finally {
    await receivers?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
