import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPipeline, type Pipeline } from '../consumer/pipeline.js';
import { RetryPolicy } from '../consumer/retry-policy.js';
import { KEY_HEADER, type Envelope } from '../core/envelope.js';
import type { DuplicateSource, Outcome } from '../core/outcome.js';
import { injectCommitFailures } from '../testing/commit-failure.js';
import { EffectChecker } from '../testing/effect-checker.js';
import { FaultInjector, type FaultName } from '../testing/fault-injector.js';
import { LocalBroker } from '../transport/local/local-broker.js';
import type { LocalSubscription } from '../transport/local/local-subscription.js';
import type { Processor } from '../transport/transport.js';
import { openDemoStore, type DemoStore } from './demo-store.js';

export const DEMO_GROUP = 'points';
export const DEMO_TOPIC = 'payment-succeeded';
export const POINTS_PER_EVENT = 100;

/**
 * The demo's retry schedule: RocketMQ's shape (a few growing delays, then the dead-letter queue)
 * scaled down so that a run takes seconds: 100ms, 200ms, 500ms, 1s, 2s.
 */
export const DEMO_RETRY = new RetryPolicy({ name: 'demo', delays: ['100ms', '200ms', '500ms', '1s', '2s'] });

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
  readonly naive: boolean;
  /** Called now and then while consumers work. */
  readonly onProgress?: (done: number, total: number) => void;
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
  faults: Record<FaultName, number>;
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

interface PaymentSucceeded {
  readonly eventId: string;
  readonly orderId: string;
  readonly userId: string;
  readonly amount: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const textDecoder = new TextDecoder();

/** A consumer without oncemq: applies the effect, acks, and retries on error like any consumer. */
function naiveProcessor(
  store: DemoStore,
  injector: FaultInjector,
  counter: { deliveries: number },
): Processor {
  return {
    async process(envelope: Envelope): Promise<Outcome> {
      counter.deliveries++;
      const started = performance.now();
      const base = {
        group: DEMO_GROUP,
        key: envelope.headers[KEY_HEADER] ?? null,
        topic: envelope.topic,
        brokerId: envelope.brokerId,
        deliveryCount: envelope.deliveryCount,
      };
      try {
        const event = JSON.parse(textDecoder.decode(envelope.body)) as PaymentSucceeded;
        await store.addPointsDirect(event.userId, event.eventId, POINTS_PER_EVENT);
        injector.handlerCrash(event.eventId);
        return {
          ...base,
          elapsedMs: performance.now() - started,
          kind: 'executed',
          action: 'ack',
          mode: 'leased',
          attempt: 1,
          reclaimed: false,
          leaseLost: false,
        };
      } catch (error) {
        const decision = DEMO_RETRY.decide(envelope.deliveryCount - 1);
        const elapsedMs = performance.now() - started;
        if (decision.action === 'retry') {
          return {
            ...base,
            elapsedMs,
            kind: 'retry',
            action: 'retry',
            delayMs: decision.delayMs,
            nextDeliveryCount: envelope.deliveryCount + 1,
            reconsumeTimes: decision.reconsumeTimes,
            error,
          };
        }
        return {
          ...base,
          elapsedMs,
          kind: 'dead',
          action: 'dead-letter',
          reason: 'retries-exhausted',
          error,
        };
      }
    },
  };
}

/**
 * Runs the payment-to-points scenario once in a scratch directory: publishes the events (and the
 * poison messages the injector asks for), lets the consumers drain the topic under faults, then
 * checks every effect against what was published.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const dir = mkdtempSync(join(tmpdir(), 'oncemq-demo-'));
  const injector = new FaultInjector({ seed: options.seed, faults: options.faults, rates: options.rates });
  const broker = new LocalBroker({
    path: join(dir, 'broker.db'),
    commitInterval: '500ms',
    heartbeatInterval: '200ms',
    sessionTimeout: '2s',
    pollInterval: '5ms',
    faults: injector,
  });
  let store: DemoStore | undefined;
  const subscriptions: LocalSubscription[] = [];
  try {
    store = await openDemoStore(options.store, {
      dir,
      connections: options.consumers + 2,
      ...(options.url === undefined ? {} : { url: options.url }),
    });
    const users = Array.from({ length: options.users }, (_, index) => `user-${index}`);
    await store.setup(users);
    const checker = new EffectChecker();
    const naive = { deliveries: 0 };
    let pipeline: Pipeline | undefined;
    let processor: Processor;
    if (options.naive) {
      processor = naiveProcessor(store, injector, naive);
    } else {
      const demoStore = store;
      pipeline = createPipeline<unknown, PaymentSucceeded>({
        // commit-failure: the commit fails after the handler succeeded (the naive consumer has no commit)
        ledger: injector.enabled('commit-failure')
          ? injectCommitFailures(demoStore.ledger, injector)
          : demoStore.ledger,
        group: DEMO_GROUP,
        retry: DEMO_RETRY,
        handler: async (event, ctx) => {
          await demoStore.addPoints(ctx.tx, event.userId, event.eventId, POINTS_PER_EVENT);
          injector.handlerCrash(ctx.key, ctx.attempt);
        },
        onOutcome: (outcome) => {
          checker.observe(outcome);
        },
      });
      processor = pipeline;
    }
    await broker.init();
    for (let index = 0; index < options.consumers; index++) {
      subscriptions.push(await broker.subscribe(DEMO_GROUP, [DEMO_TOPIC], processor));
    }
    const started = performance.now();
    const expected = new Map<string, number>();
    let poison = 0;
    for (let index = 0; index < options.events; index++) {
      const eventId = `evt-${index}`;
      const userId = users[index % users.length] ?? 'user-0';
      expected.set(userId, (expected.get(userId) ?? 0) + POINTS_PER_EVENT);
      checker.published(eventId);
      const event: PaymentSucceeded = { eventId, orderId: `order-${index}`, userId, amount: 100 };
      await broker.publish({ topic: DEMO_TOPIC, key: eventId, body: event });
      if (injector.poison(eventId)) {
        const key = `poison-${index}`;
        poison++;
        checker.published(key, 'dead-letter');
        await broker.publish({ topic: DEMO_TOPIC, key, body: `{"eventId": "${key}", "userId": ` });
      }
      if (index % 100 === 99) await new Promise((resolve) => setImmediate(resolve));
    }
    const total = options.events + poison;
    const deadline = Date.now() + Math.max(120_000, options.events * 20);
    for (;;) {
      await sleep(50);
      for (const subscription of subscriptions) subscription.commit();
      const lag = await broker.lag(DEMO_GROUP, [DEMO_TOPIC]);
      options.onProgress?.(Math.max(0, total - lag), total);
      if (lag === 0 || Date.now() > deadline) break;
    }
    const elapsedMs = performance.now() - started;
    await Promise.all(subscriptions.map((subscription) => subscription.close()));
    for (const [key, count] of await store.grantsPerEvent()) checker.effect(key, count);
    for (const dead of await broker.deadLetters.list({ group: DEMO_GROUP, limit: Number.MAX_SAFE_INTEGER })) {
      checker.deadLettered(dead.key, dead.reason);
    }
    const balances = await store.balances();
    const usersWithWrongPoints = users.filter(
      (user) => (balances.get(user) ?? 0) !== (expected.get(user) ?? 0),
    ).length;
    const ledgerRows = options.naive ? null : await store.ledgerRows(DEMO_GROUP);
    const cache = store.cacheMetrics?.();
    const report = checker.report();
    const deliveries = pipeline?.metrics().deliveries ?? naive.deliveries;
    return {
      events: options.events,
      poison,
      users: options.users,
      consumers: options.consumers,
      deliveries,
      effects: report.effects,
      duplicates: { ...report.duplicates },
      deadLettered: report.deadLettered,
      deadLetterReasons: { ...report.deadLetterReasons },
      deadLetterMessages: { ...report.deadLetterMessages },
      doubleEffects: report.doubleEffects,
      lostEffects: report.lostEffects,
      usersWithWrongPoints,
      ledgerRows,
      cache:
        cache === undefined || options.naive
          ? null
          : { hits: cache.hits, misses: cache.misses, writes: cache.writes },
      faults: injector.counts(),
      seed: options.seed,
      naive: options.naive,
      ok: report.ok && usersWithWrongPoints === 0 && (ledgerRows === null || ledgerRows === options.events),
      store: options.store,
      transport: options.transport,
      elapsedMs: Math.round(elapsedMs),
      messagesPerSecond: Math.round((deliveries * 1000) / Math.max(1, elapsedMs)),
      doubleKeys: report.doubleKeys,
      lostKeys: report.lostKeys,
    };
  } finally {
    await Promise.all(subscriptions.map((subscription) => subscription.close()));
    await broker.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
