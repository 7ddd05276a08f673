// A change of an ordered group's partition count over NATS JetStream with
// `ordering.onPartitionChange: 'drain'`: members on the old count run what came before the switch, the
// new count's consumers start after it and run only once the old ones have nothing left pending; a key's
// message held in an old partition's gate holds the whole change back. Several members (transports of
// their own, as separate processes would have), one joining mid-drain, one leaving mid-drain.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Envelope, Subscription } from 'oncemq';
import { NatsTransport, type NatsTransportConfig } from 'oncemq/nats';
import { TcpProxy } from 'oncemq/testing';
import { findService } from '../support/services.js';
import { adminOf, NATS_SERVICE, natsUnderTest, QUICK_NATS, type NatsUnderTest } from '../support/nats.js';
import {
  outcomeFor,
  partitionConsumer,
  readOrderingRecord,
  resolveNatsSettings,
  sleep,
  unique,
  waitFor,
} from '../support/internal.js';

const nats = await findService(NATS_SERVICE);

/** A short lease: a drain finishes a lease after it was seen at the earliest. */
const LEASE = '3s';

/** The steps of every order, as the members ran them: `order` → steps in the order they ran. */
type Runs = Map<string, number[]>;

interface Member {
  readonly subscription: Subscription;
  readonly transport: NatsTransport;
}

const owned = (subscription: Subscription): readonly number[] =>
  'owned' in subscription ? (subscription.owned as readonly number[]) : [];
const draining = (subscription: Subscription): boolean =>
  'draining' in subscription && subscription.draining === true;
const failure = (subscription: Subscription): Error | undefined =>
  'failure' in subscription ? (subscription.failure as Error | undefined) : undefined;

describe.skipIf(!nats.available)("changing a NATS ordered group's partition count with 'drain'", () => {
  let under: NatsUnderTest;
  const others: NatsTransport[] = [];
  let topic: string;
  let group: string;
  const runs: Runs = new Map();
  /** Released when the test lets the held step run. */
  let release: () => void = () => undefined;
  let released: Promise<void>;
  /** Set once the held step is in its handler. */
  let holding = false;

  const open = (config: NatsTransportConfig): NatsTransport => {
    const transport = new NatsTransport({
      ...QUICK_NATS,
      partitionLease: LEASE,
      streamPrefix: under.streamPrefix,
      subjectPrefix: under.subjectPrefix,
      servers: `nats://127.0.0.1:${under.proxy.port}`,
      ...config,
    });
    others.push(transport);
    return transport;
  };

  /** Runs every step (recording it), except that step 1 of order `held` waits until released. */
  const handler = async (envelope: Envelope) => {
    const { order, step } = JSON.parse(new TextDecoder().decode(envelope.body)) as {
      order: string;
      step: number;
    };
    if (order === 'held' && step === 1) {
      holding = true;
      await released;
    }
    const list = runs.get(order) ?? [];
    list.push(step);
    runs.set(order, list);
    return outcomeFor(envelope, 'ack', 0);
  };

  const member = async (partitions: number, drain: boolean, port?: number): Promise<Member> => {
    const transport = open({
      partitions,
      ...(port === undefined ? {} : { servers: `nats://127.0.0.1:${port}` }),
    });
    const subscription = await transport.subscribe(group, [topic], handler, {
      ordering: drain ? { onPartitionChange: 'drain' } : {},
      concurrency: 8,
      visibility: '5s',
    });
    return { subscription, transport };
  };

  const publish = async (orders: readonly string[], steps: readonly number[]): Promise<void> => {
    for (const step of steps) {
      await Promise.all(
        orders.map((order) =>
          under.transport.publish({
            topic,
            key: `${order}-${step}`,
            orderingKey: order,
            body: { order, step },
          }),
        ),
      );
    }
  };

  /** Every order ran exactly its steps 1..`last`, in order, each once. */
  const expectInOrder = (orders: readonly string[], last: number): void => {
    const expected = Array.from({ length: last }, (_, i) => i + 1);
    for (const order of orders) expect({ order, steps: runs.get(order) }).toEqual({ order, steps: expected });
  };
  const ran = (orders: readonly string[], last: number): boolean =>
    orders.every((order) => (runs.get(order)?.length ?? 0) >= last);

  const record = async () => {
    const { jsm, close } = await adminOf(nats.url);
    try {
      return await readOrderingRecord({ jsm, settings: resolveNatsSettings({ ...under }) }, group);
    } finally {
      await close();
    }
  };

  const consumers = async (): Promise<string[]> => {
    const { jsm, close } = await adminOf(nats.url);
    try {
      const names: string[] = [];
      for await (const info of jsm.consumers.list(`${under.streamPrefix}_${topic}`)) names.push(info.name);
      return names.sort();
    } finally {
      await close();
    }
  };

  beforeEach(async () => {
    under = await natsUnderTest(nats.url, { partitionLease: LEASE });
    topic = unique('orders');
    group = unique('fulfilment');
    runs.clear();
    holding = false;
    released = new Promise((resolve) => (release = resolve));
  });

  afterEach(async () => {
    release();
    for (const transport of others.splice(0)) await transport.close();
    await under.transport.close();
    await under.cleanup();
  });

  const orders = Array.from({ length: 24 }, (_, i) => `order-${i}`);
  const all = [...orders, 'held'];

  it('moves from 2 to 4 partitions: a key held in an old partition holds the change, then every key runs in order, once', async () => {
    const old = await member(2, false);
    await publish(all, [1, 2]);
    await waitFor(() => holding && ran(orders, 2), 'the old steps run, one held', 20_000);
    const next = await member(4, true);
    expect(draining(next.subscription)).toBe(true);
    expect((await record())?.drain?.from).toBe(2);
    // The old member reads the switch within a third of a lease (1 s; more under load); then messages
    // flow during the drain.
    await sleep(2_500);
    await publish(all, [3, 4]);
    // Well past a lease: every old step is done but the held one, so the change waits for it.
    await sleep(4_000);
    expect(draining(next.subscription)).toBe(true);
    expect(runs.get('held')).toBeUndefined();
    expect(orders.every((order) => (runs.get(order)?.length ?? 0) === 2)).toBe(true);
    release();
    await waitFor(() => ran(all, 4), 'every step run', 30_000);
    await publish(all, [5]);
    await waitFor(() => ran(all, 5), 'a step after the drain run', 30_000);
    await sleep(500);
    expectInOrder(all, 5);
    expect(draining(next.subscription)).toBe(false);
    expect(owned(next.subscription)).toEqual([0, 1, 2, 3]);
    const recorded = await record();
    expect(recorded?.count).toBe(4);
    expect(recorded?.drain).toBeUndefined();
    // The old count's consumers are gone; the member left on it stopped, saying why.
    expect(await consumers()).toEqual([0, 1, 2, 3].map((i) => partitionConsumer(group, i, 4)).sort());
    await waitFor(() => failure(old.subscription) !== undefined, 'the old member stopped', 10_000);
    expect(failure(old.subscription)?.message).toMatch(/moved from 2 to 4 partitions/);
  }, 90_000);

  it('moves from 4 to 2 partitions with a member joining mid-drain, and finishes when the first new member left', async () => {
    await member(4, false);
    await publish(all, [1, 2]);
    await waitFor(() => holding && ran(orders, 2), 'the old steps run, one held', 20_000);
    const first = await member(2, true);
    await sleep(2_500);
    await publish(all, [3]);
    const joining = await member(2, true);
    expect(draining(joining.subscription)).toBe(true);
    // The member that recorded the switch leaves before the drain is done: the one that joined finishes it.
    await first.subscription.close();
    await publish(all, [4]);
    // Two leases after the join: every old step is done but the held one, so the change waits for it.
    await sleep(6_000);
    expect(draining(joining.subscription)).toBe(true);
    expect(runs.get('held')).toBeUndefined();
    release();
    await waitFor(() => ran(all, 4), 'every step run', 30_000);
    await waitFor(() => !draining(joining.subscription), 'the drain finished', 10_000);
    await publish(all, [5]);
    await waitFor(() => ran(all, 5), 'a step after the drain run', 30_000);
    await sleep(500);
    expectInOrder(all, 5);
    expect(owned(joining.subscription)).toEqual([0, 1]);
    expect(await consumers()).toEqual([0, 1].map((i) => partitionConsumer(group, i, 2)).sort());
  }, 90_000);

  it('finishes a drain whose switching member was cut off right after the switch, through a member that joins later', async () => {
    const target = new URL(nats.url);
    const cut = await TcpProxy.start({
      targetHost: target.hostname,
      targetPort: Number(target.port || 4222),
    });
    try {
      await member(2, false);
      await publish(all, [1, 2]);
      await waitFor(() => holding && ran(orders, 2), 'the old steps run, one held', 20_000);
      const switching = await member(4, true, cut.port);
      expect(draining(switching.subscription)).toBe(true);
      // The member that recorded the switch vanishes: no close, no release, nothing settled.
      cut.refuse(true);
      cut.dropConnections();
      await sleep(2_500);
      await publish(all, [3]);
      const joining = await member(4, true);
      await sleep(4_000);
      expect(draining(joining.subscription)).toBe(true);
      expect(runs.get('held')).toBeUndefined();
      release();
      await waitFor(() => ran(all, 3), 'every step run', 30_000);
      await waitFor(() => !draining(joining.subscription), 'the drain finished', 10_000);
      await sleep(500);
      expectInOrder(all, 3);
      expect(await consumers()).toEqual([0, 1, 2, 3].map((i) => partitionConsumer(group, i, 4)).sort());
    } finally {
      // The vanished member may close (and reads that the drain is finished) before the namespace goes.
      cut.refuse(false);
    }
    await sleep(1_000);
    for (const transport of others.splice(0)) await transport.close();
    await cut.close();
  }, 90_000);

  it('refuses a member on the old count (or a third one) during a drain, and on the old count after it', async () => {
    const old = await member(2, false);
    await publish(all, [1]);
    await waitFor(() => holding, 'the held step in its handler', 20_000);
    const next = await member(4, true);
    const refused = (partitions: number, drain: boolean) =>
      open({ partitions }).subscribe(group, [topic], handler, {
        ordering: drain ? { onPartitionChange: 'drain' } : {},
      });
    await expect(refused(2, false)).rejects.toThrow(/moving from 2 to 4 partitions .* configured with 2/);
    await expect(refused(2, true)).rejects.toThrow(/moving from 2 to 4 partitions .* Configure 4/);
    await expect(refused(8, true)).rejects.toThrow(/moving from 2 to 4 .* once the drain is finished/);
    await expect(
      open({ partitions: 4, topology: 'check' }).subscribe(group, [topic], handler, {
        ordering: { onPartitionChange: 'drain' },
      }),
    ).rejects.toThrow(/topology 'check' changes nothing/);
    release();
    await waitFor(() => !draining(next.subscription), 'the drain finished', 30_000);
    await old.subscription.close();
    await expect(refused(2, false)).rejects.toThrow(/ordered over 4 partitions .* configured with 2/);
  }, 90_000);
});
