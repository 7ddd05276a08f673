import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import type { Outcome } from '../core/outcome.js';
import type { Processor, SubscribeOptions, Subscription, Transport } from '../transport/transport.js';
import { describeTransportFaultCases } from './transport-conformance-faults.js';
import { describeTransportForeignCases } from './transport-conformance-foreign.js';
import { describeTransportMembershipCases } from './transport-conformance-membership.js';
import { describeTransportNamespaceCases } from './transport-conformance-namespaces.js';
import { describeTransportStartCases } from './transport-conformance-start.js';
import { describeTransportLimitCases } from './transport-conformance-limits.js';
import { describeTransportHostileHeaderCases } from './transport-conformance-hostile.js';
import { describeTransportOrderingCases } from './transport-conformance-ordering.js';
import {
  keyOf,
  outcomeFor,
  sleep,
  unique,
  waitFor,
  type Answer,
  type TransportConformanceOptions,
  type TransportFactory,
  type TransportUnderTest,
} from './transport-conformance-fixture.js';

export type {
  ForeignHeaderType,
  ForeignHeaderValue,
  ForeignMessage,
  ForeignProducer,
  PartitionCounts,
  TransportConformanceOptions,
  TransportFactory,
  TransportUnderTest,
} from './transport-conformance-fixture.js';

/** What every case gets: a fresh transport, its own topic and group, and helpers. */
export interface TransportCase {
  readonly under: TransportUnderTest;
  readonly transport: Transport;
  readonly topic: string;
  readonly group: string;
  readonly waitMs: number;
  readonly delayMs: number;
  readonly subscriptions: Subscription[];
  /** Subscribes `group` with a processor answering each delivery as `answer` says. */
  subscribe(
    group: string,
    answer: (envelope: Envelope) => Answer | Promise<Answer>,
    options?: SubscribeOptions,
  ): Promise<Subscription>;
  subscribeProcessor(group: string, processor: Processor, options?: SubscribeOptions): Promise<Subscription>;
  publish(count: number, prefix?: string): Promise<string[]>;
  waitFor(condition: () => boolean | Promise<boolean>, what: string): Promise<void>;
}

/**
 * The behaviour every transport must show, as a vitest suite: call it from a test file with a
 * factory making a fresh transport. Cases run when the transport declares the capability they check,
 * and skip otherwise — never by the transport's name. Needs vitest (a dev dependency of the caller).
 */
export function describeTransportConformance(
  name: string,
  factory: TransportFactory,
  options: TransportConformanceOptions = {},
): void {
  describe(`transport conformance: ${name}`, () => {
    const waitMs = options.waitMs ?? 20_000;
    const delayMs = options.retryDelayMs ?? 300;
    let current: TransportCase;

    beforeEach(async () => {
      const under = await factory();
      const subscriptions: Subscription[] = [];
      const subscribeProcessor = async (
        group: string,
        processor: Processor,
        extra?: SubscribeOptions,
      ): Promise<Subscription> => {
        const subscription = await under.transport.subscribe(group, [current.topic], processor, {
          ...options.subscribe,
          ...extra,
        });
        subscriptions.push(subscription);
        return subscription;
      };
      current = {
        under,
        transport: under.transport,
        topic: unique('conformance'),
        group: unique('g'),
        waitMs,
        delayMs,
        subscriptions,
        subscribeProcessor,
        subscribe: (group, answer, extra) =>
          subscribeProcessor(
            group,
            {
              process: async (envelope): Promise<Outcome> =>
                outcomeFor(envelope, await answer(envelope), delayMs),
            },
            extra,
          ),
        publish: async (count, prefix = 'key') => {
          const keys: string[] = [];
          for (let i = 0; i < count; i++) {
            const key = `${prefix}-${i}`;
            await under.transport.publish({ topic: current.topic, key, body: { i } });
            keys.push(key);
          }
          return keys;
        },
        waitFor: (condition, what) => waitFor(condition, what, waitMs),
      };
    });

    afterEach(async () => {
      await Promise.all(current.subscriptions.splice(0).map((subscription) => subscription.close()));
      await current.transport.close();
      await current.under.cleanup?.();
    });

    const test = (): TransportCase => current;

    it('confirms a publish with a broker id and delivers that copy with its key, body and a delivery count of 1', async () => {
      const { transport, topic, group } = test();
      const receipt = await transport.publish({ topic, key: 'key-1', body: { n: 1 } });
      expect(receipt.brokerId).not.toBe('');
      expect(receipt.topic).toBe(topic);
      const seen: Envelope[] = [];
      await test().subscribe(group, (envelope) => (seen.push(envelope), 'ack'));
      await test().waitFor(() => seen.length === 1, 'the delivery');
      expect(seen[0]).toMatchObject({ brokerId: receipt.brokerId, topic, deliveryCount: 1 });
      expect(keyOf(seen[0] as Envelope)).toBe('key-1');
      expect(JSON.parse(new TextDecoder().decode(seen[0]?.body))).toEqual({ n: 1 });
      await sleep(300);
      expect(seen).toHaveLength(1);
    });

    it('delivers every message to a group (members share the work), and to every group', async () => {
      const { group } = test();
      const other = unique('g');
      const keys = await test().publish(20);
      const first = new Map<string, number>();
      const second = new Map<string, number>();
      const count =
        (map: Map<string, number>) =>
        (envelope: Envelope): Answer => {
          const key = keyOf(envelope) ?? '';
          map.set(key, (map.get(key) ?? 0) + 1);
          return 'ack';
        };
      await test().subscribe(group, count(first));
      await test().subscribe(group, count(first));
      await test().subscribe(other, count(second));
      await test().waitFor(() => first.size === 20 && second.size === 20, 'every message in both groups');
      // At least once: a member joining may take over a queue before its offsets were committed.
      expect([...first.keys()].sort()).toEqual([...keys].sort());
      expect([...second.keys()].sort()).toEqual([...keys].sort());
    });

    it('redelivers a retried message with the delivery count the outcome carries', async () => {
      const { group } = test();
      await test().publish(1);
      const counts: number[] = [];
      await test().subscribe(group, (envelope) => {
        counts.push(envelope.deliveryCount);
        return counts.length < 3 ? 'retry' : 'ack';
      });
      await test().waitFor(() => counts.length === 3, 'two retries');
      await sleep(300);
      expect(counts).toEqual([1, 2, 3]);
    });

    it('never charges a retry the outcome does not charge (a busy key, a ledger outage)', async () => {
      const { group } = test();
      await test().publish(1);
      const counts: number[] = [];
      await test().subscribe(group, (envelope) => {
        counts.push(envelope.deliveryCount);
        if (counts.length <= 2) return 'retry-uncharged';
        return counts.length === 3 ? 'retry' : 'ack';
      });
      await test().waitFor(() => counts.length === 4, 'three retries');
      expect(counts).toEqual([1, 1, 1, 2]);
    });

    it('waits at least the retry delay before redelivering (delay capability)', async (ctx) => {
      const { group, transport, delayMs } = test();
      if (!transport.capabilities.delay) ctx.skip();
      await test().publish(1);
      const at: number[] = [];
      await test().subscribe(group, () => (at.push(Date.now()), at.length === 1 ? 'retry' : 'ack'));
      await test().waitFor(() => at.length === 2, 'the retry');
      expect((at[1] ?? 0) - (at[0] ?? 0)).toBeGreaterThanOrEqual(delayMs * 0.9);
    });

    it('acks nothing before the outcome: a processor that throws gets the same copy again', async () => {
      const { group, transport, topic } = test();
      const receipt = await transport.publish({ topic, key: 'key-t', body: {} });
      const seen: string[] = [];
      await test().subscribeProcessor(group, {
        process: (envelope) => {
          seen.push(envelope.brokerId);
          if (seen.length === 1) return Promise.reject(new Error('processor down'));
          return Promise.resolve(outcomeFor(envelope, 'ack', 0));
        },
      });
      await test().waitFor(() => seen.length >= 2, 'the copy again');
      expect(seen.slice(0, 2)).toEqual([receipt.brokerId, receipt.brokerId]);
    });

    it('does not deliver a dead-lettered message again, and a poison message never blocks the others', async () => {
      const { group, transport, topic } = test();
      await transport.publish({ topic, key: 'poison', body: {} });
      await test().publish(20, 'after');
      const seen: string[] = [];
      let poisonRetries = 0;
      await test().subscribe(group, (envelope) => {
        const key = keyOf(envelope) ?? '';
        seen.push(key);
        if (key !== 'poison') return 'ack';
        return ++poisonRetries < 3 ? 'retry' : 'dead-letter';
      });
      // Every other message is delivered; a copy of one may come again (at least once: RocketMQ FIFO
      // redelivers the messages fetched with a group's head when the head is retried), the poison never.
      await test().waitFor(
        () => new Set(seen.filter((key) => key.startsWith('after'))).size === 20 && poisonRetries === 3,
        'the others and the poison dead-lettered',
      );
      await sleep(test().delayMs * 2);
      expect(seen.filter((key) => key === 'poison')).toHaveLength(3);
    });

    describeDeadLetterCases(test);
    describeLifecycleCases(test);
    describeTransportFaultCases(test);
    describeTransportHostileHeaderCases(test);
    describeTransportForeignCases(test);
    describeTransportMembershipCases(test);
    describeTransportLimitCases(test);
    describeTransportOrderingCases(test);
    // Several groups, each waited for: more than one wait long.
    describeTransportNamespaceCases(test, waitMs * 3);
    describeTransportStartCases(test, waitMs * 3);
  });
}

/** Dead letters listed with why, replayed to their group only, purged (deadLetter capability). */
function describeDeadLetterCases(test: () => TransportCase): void {
  it('keeps dead letters with reason, last error, topic, key and attempt; replays to the group only; purges', async (ctx) => {
    const { group, transport, topic } = test();
    if (!transport.capabilities.deadLetter) ctx.skip();
    const other = unique('g');
    await transport.publish({ topic, key: 'dead-1', body: { n: 1 } });
    await transport.publish({ topic, key: 'dead-2', body: { n: 2 } });
    const seen: Envelope[] = [];
    const otherSeen: string[] = [];
    let healed = false;
    await test().subscribe(group, (envelope) => {
      seen.push(envelope);
      if (healed) return 'ack';
      return envelope.deliveryCount < 2 ? 'retry' : 'dead-letter';
    });
    await test().subscribe(other, (envelope) => (otherSeen.push(keyOf(envelope) ?? ''), 'ack'));
    await test().waitFor(
      async () => (await transport.deadLetters.list({ group })).length === 2,
      'two dead letters',
    );
    const letters = await transport.deadLetters.list({ group });
    expect(letters.map((letter) => letter.key).sort()).toEqual(['dead-1', 'dead-2']);
    const first = letters.find((letter) => letter.key === 'dead-1');
    expect(first).toMatchObject({ group, topic, reason: 'permanent-error', deliveryCount: 2 });
    expect(first?.error).toMatch(/conformance: poison/);
    expect(JSON.parse(new TextDecoder().decode(first?.body))).toEqual({ n: 1 });
    expect(await transport.deadLetters.list({ group, reason: 'conflict' })).toEqual([]);
    expect(await transport.deadLetters.list({ group: other })).toEqual([]);

    healed = true;
    const before = seen.length;
    expect(await transport.deadLetters.replay(group, [first?.id ?? ''])).toBe(1);
    await test().waitFor(() => seen.length === before + 1, 'the replayed copy');
    expect(keyOf(seen.at(-1) as Envelope)).toBe('dead-1');
    expect(seen.at(-1)?.deliveryCount).toBe(1);
    expect((await transport.deadLetters.list({ group })).map((letter) => letter.key)).toEqual(['dead-2']);
    await sleep(300);
    expect(otherSeen.sort()).toEqual(['dead-1', 'dead-2']);

    const second = letters.find((letter) => letter.key === 'dead-2');
    expect(await transport.deadLetters.purge(group, [second?.id ?? ''])).toBe(1);
    expect(await transport.deadLetters.list({ group })).toEqual([]);
    expect(await transport.deadLetters.replay(group, [second?.id ?? ''])).toBe(0);
  });

  it('answers every dead-letter call with an error when it keeps none (no deadLetter capability)', async (ctx) => {
    const { transport, group } = test();
    if (transport.capabilities.deadLetter) ctx.skip();
    await expect(transport.deadLetters.list({ group })).rejects.toThrow(/dead letters/);
  });
}

/** Closing, draining, long handlers, batches. */
function describeLifecycleCases(test: () => TransportCase): void {
  it('stops delivering to a closed subscription', async () => {
    const { group, transport, topic } = test();
    let count = 0;
    const subscription = await test().subscribe(group, () => (count++, 'ack'));
    await transport.publish({ topic, key: 'key-1', body: {} });
    await test().waitFor(() => count === 1, 'the first delivery');
    await subscription.close();
    await transport.publish({ topic, key: 'key-2', body: {} });
    await sleep(300);
    expect(count).toBe(1);
  });

  it('closing drains the deliveries in progress: their outcome is settled, they do not come again', async () => {
    const { group, transport, topic } = test();
    await transport.publish({ topic, key: 'slow', body: {} });
    let started = 0;
    let finished = 0;
    let released = false;
    const subscription = await test().subscribe(group, async (envelope: Envelope): Promise<Answer> => {
      started++;
      // held past a short visibility, kept from the group's other members as a pipeline keeps it
      while (!released) {
        await sleep(Math.min(envelope.keepAlive?.everyMs ?? 100, 100));
        await envelope.keepAlive?.extend();
      }
      finished++;
      return 'ack';
    });
    await test().waitFor(() => started === 1, 'the slow delivery');
    // The handler goes on only once close() has had time to end: a close that did not wait for it
    // (however long the broker's own shutdown takes, up to that time) would end before it finished.
    let finishedAtClose: number | undefined;
    const closing = subscription.close().then(() => {
      finishedAtClose = finished;
    });
    await Promise.race([closing, sleep(3000)]);
    released = true;
    await closing;
    expect(finishedAtClose).toBe(1);
    await test().subscribe(group, () => (started++, 'ack'));
    await sleep(800);
    expect(started).toBe(1);
  });

  it('keeps a long handler’s delivery from the group’s other members (keepAlive capability)', async (ctx) => {
    const { group, transport, topic } = test();
    if (!transport.capabilities.keepAlive) ctx.skip();
    const deliveries: string[] = [];
    const longRun = async (envelope: Envelope): Promise<Answer> => {
      deliveries.push(envelope.brokerId);
      const until = Date.now() + 3000;
      while (Date.now() < until) {
        await sleep(Math.min(envelope.keepAlive?.everyMs ?? 200, 200));
        await envelope.keepAlive?.extend();
      }
      return 'ack';
    };
    await test().subscribe(group, longRun, { visibility: 1000 });
    await test().subscribe(group, longRun, { visibility: 1000 });
    // Both members are in the group before the message comes: this checks the broker's visibility,
    // not a rebalance (a member joining may take over a queue and redeliver, as in RocketMQ).
    await sleep(500);
    await transport.publish({ topic, key: 'long', body: {} });
    await test().waitFor(() => deliveries.length >= 1, 'the long delivery');
    await sleep(3500);
    expect(deliveries).toHaveLength(1);
  });

  it('hands waiting messages to processBatch several at a time (batch capability)', async (ctx) => {
    const { group, transport } = test();
    if (!transport.capabilities.batch) ctx.skip();
    const keys = await test().publish(40);
    const sizes: number[] = [];
    const seen = new Set<string>();
    await test().subscribeProcessor(
      group,
      {
        process: (envelope) => {
          sizes.push(1);
          seen.add(keyOf(envelope) ?? '');
          return Promise.resolve(outcomeFor(envelope, 'ack', 0));
        },
        processBatch: (envelopes) => {
          sizes.push(envelopes.length);
          for (const envelope of envelopes) seen.add(keyOf(envelope) ?? '');
          return Promise.resolve(envelopes.map((envelope) => outcomeFor(envelope, 'ack', 0)));
        },
      },
      { batchSize: 10 },
    );
    await test().waitFor(() => seen.size === keys.length, 'every message');
    expect(Math.max(...sizes)).toBeGreaterThan(1);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(10);
  });
}
