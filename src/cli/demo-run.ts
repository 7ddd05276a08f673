import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EffectChecker } from '../testing/effect-checker.js';
import { FaultInjector } from '../testing/fault-injector.js';
import { LocalBroker } from '../transport/local/local-transport.js';
import type { LocalSubscription } from '../transport/local/local-subscription.js';
import { DEMO_GROUP, DEMO_TOPIC, demoConsumer, type PaymentSucceeded } from './demo-consumer.js';
import { demoResult, expectedPoints, type DemoOptions, type DemoResult } from './demo-result.js';
import { openRunStore, type DemoStore } from './demo-store.js';
import { SILENT_LOGGER } from '../core/logger.js';
import { setTimeout as sleep } from 'node:timers/promises';

export { DEMO_GROUP, DEMO_RETRY, DEMO_TOPIC, POINTS_PER_EVENT } from './demo-consumer.js';
export type { DemoLive, DemoOptions, DemoResult, DemoView } from './demo-result.js';

/** The embedded broker of a demo run, in its scratch directory, with the injector's fault hooks. */
export function demoLocalBroker(dir: string, injector: FaultInjector): LocalBroker {
  return new LocalBroker({
    path: join(dir, 'broker.db'),
    commitInterval: '500ms',
    heartbeatInterval: '200ms',
    sessionTimeout: '2s',
    pollInterval: '5ms',
    faults: injector,
    logger: SILENT_LOGGER,
  });
}

/**
 * Runs the payment-to-points scenario once in a scratch directory: publishes the events (and the
 * poison messages the injector asks for), lets the consumers drain the topic under faults, then
 * checks every effect against what was published. `--transport local` runs on the embedded broker,
 * whose fault hooks inject every fault; any other transport runs on its broker (demo-broker-run.ts).
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  if (options.transport !== 'local') {
    return (await import('./demo-broker-run.js')).runBrokerDemo(options);
  }
  const dir = mkdtempSync(join(tmpdir(), 'oncemq-demo-'));
  const injector = new FaultInjector({ seed: options.seed, faults: options.faults, rates: options.rates });
  const broker = demoLocalBroker(dir, injector);
  let store: DemoStore | undefined;
  const subscriptions: LocalSubscription[] = [];
  try {
    const runStore = await openRunStore(options, dir, options.consumers + 2);
    store = runStore.store;
    const users = runStore.users;
    const checker = new EffectChecker();
    const consumer = demoConsumer(store, injector, checker, options.naive);
    await broker.init();
    for (let index = 0; index < options.consumers; index++) {
      subscriptions.push(await broker.subscribe(DEMO_GROUP, [DEMO_TOPIC], consumer.processor));
    }
    await options.live?.started({
      ledger: store.ledger,
      deadLetters: broker.deadLetters,
      transport: 'local',
      group: DEMO_GROUP,
      metrics: () => consumer.metrics(),
    });
    const started = performance.now();
    let poison = 0;
    for (let index = 0; index < options.events; index++) {
      const eventId = `evt-${index}`;
      const userId = users[index % users.length] ?? 'user-0';
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
    for (const dead of await broker.deadLetters.list({ group: DEMO_GROUP, limit: Number.MAX_SAFE_INTEGER })) {
      checker.deadLettered(dead.key, dead.reason);
    }
    const result = await demoResult(options, {
      store,
      checker,
      injector,
      users,
      expected: expectedPoints(users, options.events),
      poison,
      deliveries: consumer.deliveries(),
      connectionDrops: 0,
      elapsedMs,
    });
    if (options.live !== undefined) {
      subscriptions.push(await broker.subscribe(DEMO_GROUP, [DEMO_TOPIC], consumer.processor));
      await options.live.finished(result);
    }
    return result;
  } finally {
    await Promise.all(subscriptions.map((subscription) => subscription.close()));
    await broker.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
