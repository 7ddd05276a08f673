import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EffectChecker } from '../testing/effect-checker.js';
import { FaultInjector } from '../testing/fault-injector.js';
import type { Subscription, Transport } from '../transport/transport.js';
import { faultyProcessor, publishWithResends } from './broker-faults.js';
import { brokerRoute } from './broker-route.js';
import { ConnectionCuts } from './connection-cuts.js';
import { DEMO_GROUP, DEMO_TOPIC, demoConsumer, type PaymentSucceeded } from './demo-consumer.js';
import { demoResult, expectedPoints, type DemoOptions, type DemoResult } from './demo-result.js';
import { openRunStore, type DemoStore } from './demo-store.js';
import { RUN_SUBSCRIBE, runTransport } from './run-transports.js';
import { settle } from './settle.js';

/** Messages the demo's producer keeps in flight at once. */
const PUBLISH_WINDOW = 64;
/** How often, on average, the demo cuts the consumers' broker connections while they work. */
const DROP_EVERY_MS = 1500;

/**
 * The payment-to-points scenario on a real broker: the consumers reach it through a TCP proxy the
 * demo cuts about every {@link DROP_EVERY_MS}; lost confirms are resent with the same key; after a commit
 * the ack is lost now and then (crash after commit). Topics and groups live in a namespace made for
 * the run, deleted from the broker after it. The gaps between cuts vary around that period
 * ({@link ConnectionCuts}).
 */
export async function runBrokerDemo(options: DemoOptions): Promise<DemoResult> {
  const entry = await runTransport(options.transport);
  const dir = mkdtempSync(join(tmpdir(), 'oncemq-demo-'));
  const namespace = `oncemq-demo-${randomBytes(4).toString('hex')}`;
  const injector = new FaultInjector({ seed: options.seed, faults: options.faults, rates: options.rates });
  const route = await brokerRoute(entry, join(dir, 'broker.db'), options.brokerUrl);
  const transports: Transport[] = [];
  const subscriptions: Subscription[] = [];
  let store: DemoStore | undefined;
  let cuts: ConnectionCuts | undefined;
  let failed = false;
  let opened = false;
  try {
    const runStore = await openRunStore(options, dir, options.consumers + 2);
    store = runStore.store;
    const users = runStore.users;
    const checker = new EffectChecker();
    const consumer = demoConsumer(store, injector, checker, options.naive);
    const processor = faultyProcessor(consumer.processor, injector);
    const producer = await entry.open({ url: route.direct, namespace });
    opened = true;
    transports.push(producer);
    for (let index = 0; index < options.consumers; index++) {
      const transport = await entry.open({ url: route.proxied, namespace });
      transports.push(transport);
      subscriptions.push(await transport.subscribe(DEMO_GROUP, [DEMO_TOPIC], processor, RUN_SUBSCRIBE));
    }
    await options.live?.started({
      ledger: store.ledger,
      deadLetters: producer.deadLetters,
      transport: options.transport,
      group: DEMO_GROUP,
      metrics: () => consumer.metrics(),
    });
    const started = performance.now();
    cuts = new ConnectionCuts(route, options.seed, DROP_EVERY_MS).start();
    let poison = 0;
    const poisonKeys: string[] = [];
    const inFlight = new Set<Promise<unknown>>();
    const send = async (work: Promise<unknown>): Promise<void> => {
      const tracked = work.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
      if (inFlight.size >= PUBLISH_WINDOW) await Promise.race(inFlight);
    };
    for (let index = 0; index < options.events; index++) {
      const eventId = `evt-${index}`;
      const userId = users[index % users.length] ?? 'user-0';
      checker.published(eventId);
      const event: PaymentSucceeded = { eventId, orderId: `order-${index}`, userId, amount: 100 };
      await send(publishWithResends(producer, { topic: DEMO_TOPIC, key: eventId, body: event }, injector));
      // One drop halfway whatever the timing, so a run faster than DROP_EVERY_MS still meets one.
      if (index === Math.floor(options.events / 2)) cuts.drop();
      if (injector.poison(eventId)) {
        const key = `poison-${index}`;
        poison++;
        poisonKeys.push(key);
        checker.published(key, 'dead-letter');
        const body = `{"eventId": "${key}", "userId": `;
        await send(publishWithResends(producer, { topic: DEMO_TOPIC, key, body }, injector));
      }
    }
    await Promise.all(inFlight);
    const settled = await settle({
      store,
      deadLetters: producer.deadLetters,
      group: DEMO_GROUP,
      events: options.events,
      poisonKeys,
      activity: () => consumer.deliveries(),
      timeoutMs: Math.max(120_000, options.events * 20),
      ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
    });
    cuts.stop();
    const elapsedMs = performance.now() - started;
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    for (const dead of settled.deadLetters) checker.deadLettered(dead.key, dead.reason);
    const result = await demoResult(options, {
      store,
      checker,
      injector,
      users,
      expected: expectedPoints(users, options.events),
      poison,
      deliveries: consumer.deliveries(),
      connectionDrops: cuts.drops,
      elapsedMs,
    });
    if (options.live !== undefined) {
      subscriptions.push(
        await producer.subscribe(DEMO_GROUP, [DEMO_TOPIC], consumer.processor, RUN_SUBSCRIBE),
      );
      await options.live.finished(result);
    }
    return result;
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    cuts?.stop();
    await Promise.all(subscriptions.map((subscription) => subscription.close()));
    await Promise.all(transports.map((transport) => transport.close()));
    await route.close();
    // Nothing is on the broker before the producer opened. After a failed run, a failed clean-up
    // (often the same unreachable broker) must not hide its error.
    if (opened) {
      await entry.cleanup({ url: route.direct, namespace }, [DEMO_GROUP]).catch((error: unknown) => {
        if (!failed) throw error;
      });
    }
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
