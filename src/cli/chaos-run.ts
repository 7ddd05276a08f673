import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EffectChecker } from '../testing/effect-checker.js';
import { FaultInjector } from '../testing/fault-injector.js';
import type { Transport } from '../transport/transport.js';
import { brokerRoute, routePorts, urlPort, type BrokerRoute } from './broker-route.js';
import { resolveServiceUrl } from './connection.js';
import { TestHosts } from './test-hosts.js';
import { ClusterNodes, readCluster } from './cluster-nodes.js';
import { clusterRoute } from './cluster-route.js';
import { NodeFaults, type NodeFault } from './node-faults.js';
import { ChaosMembers } from './chaos-members.js';
import { ChaosSchedule } from './chaos-schedule.js';
import { DEMO_GROUP, DEMO_TOPIC, type PaymentSucceeded } from './demo-consumer.js';
import { expectedPoints } from './demo-result.js';
import { openDemoStore, type DemoStore } from './demo-store.js';
import { runTransport } from './run-transports.js';
import { settle } from './settle.js';
import { publishWithResends } from './broker-faults.js';
import { UsageError } from './command.js';
import { CREATE_AUDIT, leasedAudit, leasedFigures, leasedProgress, leasedStore } from './chaos-leased.js';

/** Stores chaos runs on: several processes must share them. */
export const CHAOS_STORES = ['sqlite', 'postgres', 'mysql'] as const;

export interface ChaosOptions {
  readonly transport: string;
  readonly store: string;
  readonly events: number;
  readonly consumers: number;
  readonly seed: string;
  /** The store's server, if not the default. */
  readonly storeUrl?: string;
  /** The broker, if not the default. */
  readonly brokerUrl?: string;
  /** Chance that the producer sends an event again (a lost confirm). @default 0.02 */
  readonly resendRate?: number;
  /** Chance that a poison message (a body that cannot be decoded) follows an event. @default 0.001 */
  readonly poisonRate?: number;
  /** A kill -9 of a random member every this long while events flow. @default 4000 */
  readonly killEveryMs?: number;
  /** Broker connections cut every this long. @default 2000 */
  readonly dropEveryMs?: number;
  /** The run's database connections killed every this long (server stores). @default 3000 */
  readonly poolEveryMs?: number;
  /** Rounds of kill, drop and pool restart between slices of the publishing, whatever the timing. @default 2 */
  readonly rounds?: number;
  /** Deliveries each member processes at once. @default 16 */
  readonly concurrency?: number;
  /** Longest wait for every event to settle. @default max(2 min, 10 ms per event) */
  readonly timeoutMs?: number;
  readonly onProgress?: (done: number, total: number) => void;
  /** A three-node cluster of the broker, whose nodes fail during the run (`--cluster`). */
  readonly cluster?: ChaosClusterOptions;
  /** Members on several test hosts (network namespaces) whose links are cut during the run (`--hosts`). */
  readonly hosts?: ChaosHostsOptions;
  /**
   * Leased mode (`--mode leased`): each member claims with an owner-checked lease of `leaseMs`,
   * renewed while its handler runs, applies the effect outside the ledger's transaction and then
   * completes; the run audits every claim, application and completion. @default transactional mode
   */
  readonly leased?: { readonly leaseMs: number };
}

/** Test hosts of a run: the members spread over them, one host's link cut at a time. */
export interface ChaosHostsOptions {
  /** Hosts (network namespaces); member `i` runs on host `i mod count`. */
  readonly count: number;
  /** A host cut off every this long (on average). */
  readonly cutEveryMs: number;
  /** A cut host stays off the network this long. */
  readonly cutForMs: number;
}

/** Node failures of a run on a cluster started by `npm run brokers -- start --cluster`. */
export interface ChaosClusterOptions {
  /** The cluster's `cluster.json`. */
  readonly file: string;
  /** A node failure every this long, kill and pause in turn. */
  readonly everyMs: number;
  /** A killed node stays down this long. */
  readonly downMs: number;
  /** A paused node stays paused this long. */
  readonly pauseMs: number;
}

export interface ChaosResult {
  transport: string;
  store: string;
  seed: string;
  events: number;
  poison: number;
  consumers: number;
  /** Copies the producer sent again with the same key. */
  producerResends: number;
  kills: number;
  connectionDrops: number;
  poolRestarts: number;
  effects: number;
  doubleEffects: number;
  lostEffects: number;
  deadLettered: number;
  deadLetterReasons: Record<string, number>;
  usersWithWrongPoints: number;
  /** SUCCESS ledger rows of the group; must equal `events`. */
  ledgerRows: number;
  /** Every event accounted for and the members quiet before the timeout. */
  settled: boolean;
  durationMs: number;
  eventsPerSecond: number;
  ok: boolean;
  doubleKeys: readonly string[];
  lostKeys: readonly string[];
  /** The members' last stderr lines, when the run failed. */
  memberErrors: readonly string[];
  /** Nodes killed with SIGKILL and started again (runs on a cluster). */
  nodeKills?: number;
  /** Nodes paused with SIGSTOP past the cluster's timeouts, then resumed (runs on a cluster). */
  nodePauses?: number;
  /** Each node failure: which node, whether it led, when, and how long until it was back. */
  nodeFaults?: readonly NodeFault[];
  /** Test hosts the members ran on (runs with `--hosts`). */
  hosts?: number;
  /** Times a host's link was taken down (runs with `--hosts`). */
  hostCuts?: number;
  /** `transactional`, or `leased` with the figures of its audit below. */
  mode: 'transactional' | 'leased';
  leaseMs?: number;
  /** Leased: claims that took over a key whose lease had ended (a cut or killed owner's). */
  takeovers?: number;
  /** Leased: completions the ledger refused, the owner's lease having ended and the key taken over. */
  staleCompletesRefused?: number;
  /** Leased: completions accepted from an owner that was not the key's last claimant (must be 0). */
  staleCompletesAccepted?: number;
  /** Leased: effects applied (one per handler run that reached its write). */
  applications?: number;
  /** Leased: events whose effect was applied more than once (at-least-once outside the transaction). */
  applicationsDoubled?: number;
  /** Leased: keys of stale completions accepted, a few. */
  staleKeys?: readonly string[];
}

/** Messages the producer keeps in flight at once. */
const PUBLISH_WINDOW = 64;

/** Publishes event `from` to `to` (and the poison the injector asks for); returns resends. */
async function publishSlice(
  producer: Transport,
  injector: FaultInjector,
  users: readonly string[],
  range: { from: number; to: number },
  published: { checker: EffectChecker; poisonKeys: string[] },
): Promise<number> {
  let resends = 0;
  const inFlight = new Set<Promise<unknown>>();
  const send = async (key: string, body: string | object): Promise<void> => {
    const work = publishWithResends(producer, { topic: DEMO_TOPIC, key, body }, injector).then(
      ({ copies }) => {
        resends += copies - 1;
      },
    );
    const tracked = work.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
    if (inFlight.size >= PUBLISH_WINDOW) await Promise.race(inFlight);
  };
  for (let index = range.from; index < range.to; index++) {
    const eventId = `evt-${index}`;
    const userId = users[index % users.length] ?? 'user-0';
    published.checker.published(eventId);
    const event: PaymentSucceeded = { eventId, orderId: `order-${index}`, userId, amount: 100 };
    await send(eventId, event);
    if (injector.poison(eventId)) {
      const key = `poison-${index}`;
      published.poisonKeys.push(key);
      published.checker.published(key, 'dead-letter');
      await send(key, `{"eventId": "${key}", "userId": `);
    }
  }
  await Promise.all(inFlight);
  return resends;
}

/**
 * Several consumer processes on one group while the harness publishes (with resends), kills members
 * with SIGKILL and restarts them, cuts their broker connections through a proxy and kills their
 * database connections; then waits until every event settled and checks every effect in the
 * database (grant rows per event, balances, ledger rows).
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const entry = await runTransport(options.transport);
  const dir = mkdtempSync(join(tmpdir(), 'oncemq-chaos-'));
  const namespace = `oncemq_chaos_${randomBytes(4).toString('hex')}`;
  const injector = new FaultInjector({
    seed: options.seed,
    faults: ['producer-ack-loss', 'poison'],
    rates: { 'producer-ack-loss': options.resendRate ?? 0.02, poison: options.poisonRate ?? 0.001 },
  });
  let route: BrokerRoute | undefined;
  let store: DemoStore | undefined;
  let producer: Transport | undefined;
  let members: ChaosMembers | undefined;
  let schedule: ChaosSchedule | undefined;
  let nodeFaults: NodeFaults | undefined;
  let hosts: TestHosts | undefined;
  let failed = false;
  try {
    let replicas = 1;
    let nodes: ClusterNodes | undefined;
    if (options.cluster === undefined) {
      route = await brokerRoute(entry, join(dir, 'broker.db'), options.brokerUrl);
    } else {
      if (entry.cluster === undefined)
        throw new UsageError(`--cluster is not available on ${options.transport}`);
      nodes = new ClusterNodes(readCluster(options.cluster.file, options.transport));
      replicas = nodes.state.nodes.length;
      route = await clusterRoute(entry.cluster, nodes.state);
    }
    store = await openDemoStore(options.store, {
      dir,
      connections: 4,
      namespace,
      ...(options.storeUrl === undefined ? {} : { url: options.storeUrl }),
    });
    const users = Array.from({ length: Math.max(1, Math.ceil(options.events / 10)) }, (_, i) => `user-${i}`);
    await store.setup(users);
    const audit = options.leased === undefined ? undefined : leasedStore(store);
    if (audit !== undefined) await audit.sql(CREATE_AUDIT);
    producer = await entry.open({ url: route.direct, namespace, replicas });
    if (options.hosts !== undefined) {
      if (entry.service === undefined || (options.store !== 'postgres' && options.store !== 'mysql')) {
        throw new UsageError(
          '--hosts needs a broker server and --store postgres or mysql: hosts share them over the network',
        );
      }
      const storePort = urlPort(resolveServiceUrl(options.store, options.storeUrl).url);
      hosts = await TestHosts.create(options.hosts.count, [
        ...routePorts(route),
        ...(storePort === undefined ? [] : [storePort]),
      ]);
    }
    const onHosts = hosts;
    members = new ChaosMembers(
      [
        ...['--transport', options.transport, '--broker-url', route.proxied, '--store', options.store],
        ...(replicas === 1 ? [] : ['--replicas', String(replicas)]),
        ...['--namespace', namespace, '--dir', dir, '--concurrency', String(options.concurrency ?? 16)],
        ...(options.storeUrl === undefined ? [] : ['--store-url', options.storeUrl]),
        ...(options.leased === undefined ? [] : ['--lease', String(options.leased.leaseMs)]),
      ],
      onHosts === undefined ? undefined : (index) => onHosts.place(index),
    );
    await members.start(options.consumers);
    schedule = new ChaosSchedule({
      members,
      route,
      store,
      seed: options.seed,
      killEveryMs: options.killEveryMs ?? 4000,
      dropEveryMs: options.dropEveryMs ?? 2000,
      poolEveryMs: options.poolEveryMs ?? 3000,
    });
    const checker = new EffectChecker();
    const published = { checker, poisonKeys: [] as string[] };
    if (options.cluster !== undefined && nodes !== undefined && entry.cluster !== undefined) {
      const support = entry.cluster;
      const state = nodes.state;
      const target = { url: route.direct, namespace, replicas };
      nodeFaults = new NodeFaults({
        nodes,
        leader: () => support.leader(target, DEMO_TOPIC, DEMO_GROUP, state),
        seed: options.seed,
        everyMs: options.cluster.everyMs,
        downMs: options.cluster.downMs,
        pauseMs: options.cluster.pauseMs,
      });
    }
    const started = performance.now();
    schedule.start();
    nodeFaults?.start();
    if (options.hosts !== undefined) {
      hosts?.startCuts({
        everyMs: options.hosts.cutEveryMs,
        forMs: options.hosts.cutForMs,
        seed: options.seed,
      });
    }
    const rounds = options.rounds ?? 2;
    let resends = 0;
    for (let round = 0; round <= rounds; round++) {
      const range = {
        from: Math.floor((options.events * round) / (rounds + 1)),
        to: Math.floor((options.events * (round + 1)) / (rounds + 1)),
      };
      resends += await publishSlice(producer, injector, users, range, published);
      if (round < rounds) {
        await schedule.round();
        nodeFaults?.trigger();
        if (options.hosts !== undefined) hosts?.cut(round, options.hosts.cutForMs);
      }
    }
    const settled = await settle({
      // leased: an event is done once its key is completed (its effect is applied before that)
      store:
        audit === undefined ? store : { grantedEvents: () => leasedProgress(audit.sql, audit.ledgerTable) },
      deadLetters: producer.deadLetters,
      group: DEMO_GROUP,
      events: options.events,
      poisonKeys: published.poisonKeys,
      quietMs: 2000,
      timeoutMs: options.timeoutMs ?? Math.max(120_000, options.events * 10),
      ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
    });
    await schedule.stop();
    await nodeFaults?.stop();
    const durationMs = performance.now() - started;
    // a host still cut off comes back before the members stop: the run measured up to the settle
    await hosts?.stopCuts();
    await members.stop();
    for (const dead of settled.deadLetters) checker.deadLettered(dead.key, dead.reason);
    const leased = audit === undefined ? undefined : await leasedAudit(audit.sql, audit.ledgerTable);
    for (const [key, count] of leased?.applies ?? (await store.grantsPerEvent())) checker.effect(key, count);
    // leased: no balances (the effect is the audit's apply row)
    const balances = leased === undefined ? await store.balances() : undefined;
    const expected = expectedPoints(users, options.events);
    const usersWithWrongPoints =
      balances === undefined ? 0 : users.filter((u) => (balances.get(u) ?? 0) !== expected.get(u)).length;
    const ledgerRows = await store.ledgerRows(DEMO_GROUP);
    const report = checker.report();
    // leased: an effect outside the transaction may be applied twice (reported); nothing lost, no stale completion
    const effectsOk =
      leased === undefined ? report.ok : report.lostEffects === 0 && leased.staleCompletesAccepted === 0;
    const ok = effectsOk && usersWithWrongPoints === 0 && ledgerRows === options.events && settled.complete;
    return {
      transport: options.transport,
      store: options.store,
      seed: options.seed,
      events: options.events,
      poison: published.poisonKeys.length,
      consumers: options.consumers,
      producerResends: resends,
      kills: members.kills,
      connectionDrops: schedule.connectionDrops,
      poolRestarts: schedule.poolRestarts,
      effects: report.effects,
      doubleEffects: report.doubleEffects,
      lostEffects: report.lostEffects,
      deadLettered: report.deadLettered,
      deadLetterReasons: { ...report.deadLetterReasons },
      usersWithWrongPoints,
      ledgerRows,
      settled: settled.complete,
      durationMs: Math.round(durationMs),
      eventsPerSecond: Math.round((options.events * 1000) / Math.max(1, durationMs)),
      ok,
      doubleKeys: report.doubleKeys,
      lostKeys: report.lostKeys,
      memberErrors: ok ? [] : members.stderr.slice(-10),
      ...(nodeFaults === undefined
        ? {}
        : { nodeKills: nodeFaults.kills, nodePauses: nodeFaults.pauses, nodeFaults: nodeFaults.faults }),
      ...(hosts === undefined ? {} : { hosts: hosts.size, hostCuts: hosts.cuts }),
      ...leasedFigures(options.leased?.leaseMs, leased),
    };
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    await nodeFaults?.stop().catch(() => undefined);
    // a failed restart was thrown above where the run reached its end; here it must not skip the rest
    await schedule?.stop().catch(() => undefined);
    await hosts?.stopCuts();
    await members?.stop();
    await hosts?.close();
    await producer?.close();
    // Nothing is on the broker before the producer opened. After a failed run, a failed clean-up
    // (often the same unreachable broker) must not hide its error. The route closes after it: on a
    // cluster reached through balancers, the harness's way to the broker is one of them.
    try {
      if (route !== undefined && producer !== undefined) {
        await entry.cleanup({ url: route.direct, namespace }, [DEMO_GROUP]).catch((error: unknown) => {
          if (!failed) throw error;
        });
      }
    } finally {
      await route?.close();
    }
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
