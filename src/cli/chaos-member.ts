import { TransportUnavailableError } from '../core/errors.js';
import { EffectChecker } from '../testing/effect-checker.js';
import { FaultInjector } from '../testing/fault-injector.js';
import { leasedConsumer } from './chaos-leased.js';
import { DEMO_GROUP, DEMO_TOPIC, demoConsumer } from './demo-consumer.js';
import { openDemoStore } from './demo-store.js';
import { RUN_SUBSCRIBE, runTransport } from './run-transports.js';

/** What one member process of a chaos run needs to join it. */
export interface ChaosMemberOptions {
  readonly transport: string;
  /** The broker as the member reaches it: through the run's proxy (the local broker's file). */
  readonly brokerUrl: string;
  readonly store: string;
  /** The store's server (postgres, mysql), if not the default. */
  readonly storeUrl?: string;
  /** The run's namespace: broker names, and the schema or database the harness created. */
  readonly namespace: string;
  /** The run's scratch directory (the SQLite store's file). */
  readonly dir: string;
  /** This member's stable name: a restarted member takes up what it left pending, where the broker names members. */
  readonly name: string;
  /** Deliveries processed at once. */
  readonly concurrency: number;
  /** Nodes of the clustered broker (replicas of what the transport creates). @default 1 */
  readonly replicas?: number;
  /** `leased`: an owner-checked lease of `leaseMs`, the effect outside the ledger's transaction. @default transactional */
  readonly leased?: { readonly leaseMs: number };
}

/**
 * One member of a chaos run: the payment-to-points pipeline on the run's store, subscribed to the
 * run's group through the proxy. Says `{"ready":true}` on stdout once subscribed; on SIGTERM, or
 * when its stdin closes (the harness ended), it drains and leaves; a `kill -9` is the harness's fault.
 */
export async function runChaosMember(options: ChaosMemberOptions): Promise<void> {
  const entry = await runTransport(options.transport);
  const store = await openDemoStore(options.store, {
    dir: options.dir,
    connections: Math.max(2, Math.min(options.concurrency, 8)),
    namespace: options.namespace,
    attach: true,
    ...(options.storeUrl === undefined ? {} : { url: options.storeUrl }),
  });
  const consumer =
    options.leased === undefined
      ? demoConsumer(store, new FaultInjector({ faults: [] }), new EffectChecker(), false)
      : leasedConsumer(store, options.name, options.leased.leaseMs);
  const { transport, subscription } = await subscribeThroughDrops(async () => {
    const opened = await entry.open({
      url: options.brokerUrl,
      namespace: options.namespace,
      ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
    });
    try {
      const subscribed = await opened.subscribe(DEMO_GROUP, [DEMO_TOPIC], consumer.processor, {
        ...RUN_SUBSCRIBE,
        concurrency: options.concurrency,
        consumerName: options.name,
      });
      return { transport: opened, subscription: subscribed };
    } catch (error) {
      await opened.close().catch(() => undefined);
      throw error;
    }
  });
  process.stdout.write(`${JSON.stringify({ ready: true, name: options.name })}\n`);
  // SIGTERM from the harness, or its end: the harness holds this process's stdin, which closes when it
  // exits however it exits, so no member outlives its run.
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.stdin.once('end', resolve).once('close', resolve).resume();
    if (process.stdin.readableEnded) resolve();
  });
  // a drain that cannot finish (the broker gone with the harness) must not keep the process alive
  setTimeout(() => process.exit(1), 15_000).unref();
  await subscription.close();
  await transport.close();
  await store.close();
  process.stdout.write(`${JSON.stringify({ done: true, deliveries: consumer.deliveries() })}\n`);
}

/** Subscribing attempts of a member before it gives up (and the harness starts a new process). */
const SUBSCRIBE_ATTEMPTS = 10;

/**
 * Opens the transport and subscribes, again in this process when the broker is unavailable for a
 * moment: the run cuts the broker connections every few seconds, and one cut during the subscribe
 * would otherwise cost a whole new process (seconds of start-up on a loaded machine, during which
 * the next cut comes).
 */
export async function subscribeThroughDrops<T>(subscribe: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await subscribe();
    } catch (error) {
      if (!(error instanceof TransportUnavailableError) || attempt >= SUBSCRIBE_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
    }
  }
}
