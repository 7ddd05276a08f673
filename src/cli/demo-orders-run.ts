import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRelay, type Relay } from '../outbox/relay.js';
import { OUTBOX_ID_HEADER } from '../outbox/relay-rows.js';
import { EffectChecker } from '../testing/effect-checker.js';
import { FaultInjector } from '../testing/fault-injector.js';
import type { DeadLetter } from '../transport/dead-letters.js';
import type {
  OutgoingMessage,
  Processor,
  PublishReceipt,
  Subscription,
  Transport,
} from '../transport/transport.js';
import { faultyProcessor, publishWithResends } from './broker-faults.js';
import { brokerRoute } from './broker-route.js';
import { subscribeThroughDrops } from './chaos-member.js';
import { UsageError } from './command.js';
import {
  openOrdersDb,
  ordersChecks,
  ordersConsumer,
  ORDERS_GROUP,
  ORDERS_TOPIC,
  relayCrashFault,
  runOrderService,
  type OrdersDb,
} from './demo-orders.js';
import { effectFields, type DemoOptions, type DemoResult } from './demo-result.js';
import { openDemoStore, type DemoStore } from './demo-store.js';
import { demoLocalBroker } from './demo-run.js';
import { RUN_SUBSCRIBE, runTransport } from './run-transports.js';
import { SILENT_LOGGER } from '../core/logger.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Outbox relays publishing at once (one more is started for each that crashes). */
export const ORDERS_RELAYS = 2;

/** The summary of `oncemq demo --scenario orders`: the payments fields but points, plus the orders' own. */
export type OrdersResult = Omit<DemoResult, 'users' | 'usersWithWrongPoints'> & {
  scenario: 'orders';
  orders: number;
  /** Orders whose shipment did not end in state `shipped`. */
  ordersNotShipped: number;
  /** Events applied in another state than the one their step follows (must be 0). */
  outOfOrder: number;
  /** Outbox rows the relays published and marked sent (each row once). */
  outboxPublished: number;
  /** Copies the relays published beyond the first of a row (after a relay crash or a lost lease). */
  relayDuplicates: number;
  /** Relays that died and were replaced. */
  relayCrashes: number;
};

/** Where the orders scenario's messages go and how its consumers are reached. */
interface OrdersBroker {
  /** Publishes one relayed row (with the producer faults of a real broker). */
  publish(message: OutgoingMessage): Promise<PublishReceipt>;
  subscribe(processor: Processor): Promise<void>;
  /** Messages the group has not finished, where the broker can tell (the local broker); else undefined. */
  lag(): Promise<number | undefined>;
  deadLetters(): Promise<readonly DeadLetter[]>;
  connectionDrops(): number;
  /** Closes the subscriptions (draining them). */
  stopConsumers(): Promise<void>;
  close(): Promise<void>;
}

/** The embedded broker, whose fault hooks inject every consumer-side fault. */
async function localOrdersBroker(dir: string, injector: FaultInjector): Promise<OrdersBroker> {
  const broker = demoLocalBroker(dir, injector);
  await broker.init();
  const subscriptions: Subscription[] = [];
  return {
    publish: (message) => broker.publish(message),
    async subscribe(processor) {
      subscriptions.push(await broker.subscribe(ORDERS_GROUP, [ORDERS_TOPIC], processor, { ordering: {} }));
    },
    async lag() {
      for (const subscription of subscriptions) (subscription as { commit?: () => void }).commit?.();
      return broker.lag(ORDERS_GROUP, [ORDERS_TOPIC]);
    },
    deadLetters: () => broker.deadLetters.list({ group: ORDERS_GROUP, limit: Number.MAX_SAFE_INTEGER }),
    connectionDrops: () => 0,
    stopConsumers: async () => {
      await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    },
    close: () => broker.close(),
  };
}

/**
 * A real broker: the consumers reach it through a TCP proxy cut after 1.5 s and then every 1.5 s (or
 * the transport's `orderedDropEveryMs`), lost confirms are sent again, acks are lost after commits.
 */
async function realOrdersBroker(
  options: DemoOptions,
  dir: string,
  injector: FaultInjector,
): Promise<OrdersBroker> {
  const entry = await runTransport(options.transport);
  const namespace = `oncemq-orders-${randomBytes(4).toString('hex')}`;
  const route = await brokerRoute(entry, join(dir, 'broker.db'), options.brokerUrl);
  const transports: Transport[] = [];
  const subscriptions: Subscription[] = [];
  let drops = 0;
  const drop = (): void => {
    if (route.drop() > 0) drops++;
  };
  // The first cut comes early whatever the interval, so even a short run has one.
  const every = entry.orderedDropEveryMs ?? 1500;
  let timer: NodeJS.Timeout = setTimeout(() => {
    drop();
    timer = setInterval(drop, every);
  }, 1500);
  const close = async (): Promise<void> => {
    clearTimeout(timer);
    clearInterval(timer);
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    await Promise.all(transports.map((transport) => transport.close()));
    await route.close();
    // Nothing is on the broker before the producer opened.
    if (transports.length > 0) await entry.cleanup({ url: route.direct, namespace }, [ORDERS_GROUP]);
  };
  try {
    const producer = await entry.open({ url: route.direct, namespace, ordered: true });
    transports.push(producer);
    return {
      publish: async (message) => (await publishWithResends(producer, message, injector)).receipt,
      async subscribe(processor) {
        const transport = await entry.open({ url: route.proxied, namespace, ordered: true });
        transports.push(transport);
        // The proxy's cuts start before the members join: one during a subscribe is tried again.
        subscriptions.push(
          await subscribeThroughDrops(() =>
            transport.subscribe(ORDERS_GROUP, [ORDERS_TOPIC], faultyProcessor(processor, injector), {
              ...RUN_SUBSCRIBE,
              ordering: {},
            }),
          ),
        );
      },
      lag: () => Promise.resolve(undefined),
      deadLetters: () => producer.deadLetters.list({ group: ORDERS_GROUP, limit: Number.MAX_SAFE_INTEGER }),
      connectionDrops: () => drops,
      stopConsumers: async () => {
        await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
      },
      close,
    };
  } catch (error) {
    // A failed clean-up (often the same unreachable broker) must not hide why the run could not start.
    await close().catch(() => undefined);
    throw error;
  }
}

/**
 * The relays of the run: {@link ORDERS_RELAYS} at once, each on a database of its own, counting the
 * copies they publish per row; one that dies (`relay-crash`) is replaced by a new one, which takes
 * over its rows once their lease ran out.
 */
class RelayCrew {
  readonly #all: Relay<unknown>[] = [];
  readonly #live: Relay<unknown>[] = [];
  readonly #copies = new Map<string, number>();
  #started = 0;
  #crashes = 0;
  #timer: NodeJS.Timeout | undefined;
  #checking: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: DemoStore,
    private readonly db: OrdersDb,
    private readonly broker: OrdersBroker,
    private readonly injector: FaultInjector,
  ) {}

  async start(): Promise<void> {
    for (let index = 0; index < ORDERS_RELAYS; index++) await this.#startOne();
    this.#timer = setInterval(() => {
      this.#checking = this.#checking.then(() => this.#replaceCrashed()).catch(() => undefined);
    }, 50);
  }

  async #startOne(): Promise<void> {
    const broker = this.broker;
    const copies = this.#copies;
    const crash = relayCrashFault(this.injector);
    const relay = createRelay<unknown>({
      outbox: this.db.outbox,
      logger: SILENT_LOGGER,
      transport: {
        name: 'demo',
        async publish(message) {
          const receipt = await broker.publish(message);
          const id = message.headers?.[OUTBOX_ID_HEADER] ?? message.key ?? '';
          copies.set(id, (copies.get(id) ?? 0) + 1);
          crash.afterPublish(id);
          return receipt;
        },
      },
      database: await this.store.openDatabase(),
      batchSize: 50,
      // Polling rather than waking at each commit (PostgreSQL's NOTIFY): rounds of several rows, so
      // that a relay-crash has rows of its round already published to send twice.
      pollInterval: '50ms',
      listen: false,
      lease: '1s',
      minBackoff: '50ms',
      maxBackoff: '1s',
      publishTimeout: '10s',
      cleanupEvery: '1h',
      name: `orders-relay-${++this.#started}`,
      faults: crash.faults,
    });
    await relay.start();
    this.#all.push(relay);
    this.#live.push(relay);
  }

  /** Replaces the relays that died; one that fails to start is tried again at the next check. */
  async #replaceCrashed(): Promise<void> {
    for (const relay of [...this.#live]) {
      if (!relay.crashed) continue;
      this.#live.splice(this.#live.indexOf(relay), 1);
      this.#crashes++;
      await relay.stop();
    }
    while (this.#live.length < ORDERS_RELAYS) await this.#startOne();
  }

  /** Rows marked sent, copies beyond the first per row, relays replaced. */
  counts(): { published: number; duplicates: number; crashes: number } {
    let duplicates = 0;
    for (const n of this.#copies.values()) duplicates += Math.max(0, n - 1);
    const published = this.#all.reduce((sum, relay) => sum + relay.metrics().published, 0);
    return { published, duplicates, crashes: this.#crashes };
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#checking;
    await Promise.all(this.#live.splice(0).map((relay) => relay.stop()));
  }
}

/**
 * The create → pay → ship scenario: the order service writes each event with its order row and the
 * outbox row in one transaction, relays publish them (one crashes between publish and mark when the
 * injector says so, and is replaced), and a consumer group with per-key ordering applies them to a
 * state machine under the injector's faults. Then every effect, the order of every order's steps and
 * every final state are checked.
 */
export async function runOrdersDemo(options: DemoOptions): Promise<OrdersResult> {
  if (options.naive) throw new UsageError('--naive belongs to the payments scenario');
  const orders = Math.max(1, Math.ceil(options.events / 3));
  const dir = mkdtempSync(join(tmpdir(), 'oncemq-orders-'));
  const injector = new FaultInjector({ seed: options.seed, faults: options.faults, rates: options.rates });
  let broker: OrdersBroker | undefined;
  let store: DemoStore | undefined;
  let crew: RelayCrew | undefined;
  try {
    broker =
      options.transport === 'local'
        ? await localOrdersBroker(dir, injector)
        : await realOrdersBroker(options, dir, injector);
    store = await openDemoStore(options.store, {
      dir,
      connections: options.consumers + ORDERS_RELAYS + 4,
      ...(options.url === undefined ? {} : { url: options.url }),
    });
    const db = await openOrdersDb(store);
    const checker = new EffectChecker();
    const consumer = ordersConsumer(store, db, injector, checker);
    for (let index = 0; index < options.consumers; index++) await broker.subscribe(consumer.processor);
    crew = new RelayCrew(store, db, broker, injector);
    const started = performance.now();
    await crew.start();
    const service = await runOrderService(db, orders, injector, checker);
    const total = service.events + service.poisonKeys.length;
    const deadline = Date.now() + Math.max(120_000, options.events * 20);
    let settledPolls = 0;
    let lastDeliveries = -1;
    while (Date.now() < deadline) {
      await sleep(100);
      try {
        const effected = await ordersChecks.effectedEvents(db);
        const pending = await ordersChecks.pending(db);
        const lag = await broker.lag();
        let dead = 0;
        if (lag === undefined && effected >= service.events) {
          const keys = new Set((await broker.deadLetters()).map((letter) => letter.key));
          dead = service.poisonKeys.filter((key) => keys.has(key)).length;
        }
        options.onProgress?.(Math.min(total, effected + dead), total);
        const deliveries = consumer.deliveries();
        const quiet =
          lag === undefined
            ? effected >= service.events &&
              dead === service.poisonKeys.length &&
              deliveries === lastDeliveries
            : lag === 0;
        lastDeliveries = deliveries;
        settledPolls = pending === 0 && quiet ? settledPolls + 1 : 0;
        if (settledPolls >= (lag === undefined ? 10 : 3)) break;
      } catch {
        // a poll that fails is tried again
      }
    }
    const elapsedMs = performance.now() - started;
    await crew.stop();
    await broker.stopConsumers();
    for (const dead of await broker.deadLetters()) checker.deadLettered(dead.key, dead.reason);
    for (const [key, n] of await ordersChecks.effectsPerEvent(db)) checker.effect(key, n);
    const report = checker.report();
    const outOfOrder = await ordersChecks.outOfOrder(db);
    const ordersNotShipped = await ordersChecks.notShipped(db);
    const pending = await ordersChecks.pending(db);
    const ledgerRows = await store.ledgerRows(ORDERS_GROUP);
    const relays = crew.counts();
    const cache = store.cacheMetrics?.();
    const deliveries = consumer.deliveries();
    return {
      scenario: 'orders',
      events: service.events,
      orders,
      poison: service.poisonKeys.length,
      consumers: options.consumers,
      deliveries,
      ...effectFields(report),
      outOfOrder,
      ordersNotShipped,
      outboxPublished: relays.published,
      relayDuplicates: relays.duplicates,
      relayCrashes: relays.crashes,
      ledgerRows,
      cache: cache === undefined ? null : { hits: cache.hits, misses: cache.misses, writes: cache.writes },
      faults: injector.counts(),
      connectionDrops: broker.connectionDrops(),
      seed: options.seed,
      naive: false,
      ok:
        report.ok &&
        outOfOrder === 0 &&
        ordersNotShipped === 0 &&
        pending === 0 &&
        ledgerRows === service.events,
      store: options.store,
      transport: options.transport,
      elapsedMs: Math.round(elapsedMs),
      messagesPerSecond: Math.round((deliveries * 1000) / Math.max(1, elapsedMs)),
      doubleKeys: report.doubleKeys,
      lostKeys: report.lostKeys,
    };
  } finally {
    await crew?.stop();
    await broker?.stopConsumers();
    await broker?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
