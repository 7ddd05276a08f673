// What the Kafka pitfall tests share: a transport behind a TCP proxy, a topic and group of the test's own,
// the subscriptions it opened, the group's committed offsets and the client's commit trace.
import { randomUUID } from 'node:crypto';
import { subscribe as listen, unsubscribe as stopListening } from 'node:diagnostics_channel';
import { afterEach, beforeEach } from 'vitest';
import { Consumer } from '@platformatic/kafka';
import type { Envelope, Outcome, PublishReceipt, Subscription } from 'oncemq';
import { findKafka } from './brokers.js';
import { deleteTopics, proxiedKafka, type ProxiedKafka } from './kafka.js';
import { outcomeBase } from './local-points.js';

export const kafka = await findKafka();

/** A promise that resolves when `open()` is called: holds a handler until the test lets it go. */
export function gate(): { readonly opened: Promise<void>; readonly open: () => void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open: () => open() };
}

export const retryOutcome = (envelope: Envelope, delayMs: number): Outcome => ({
  ...outcomeBase(envelope, 'g'),
  kind: 'retry',
  action: 'retry',
  delayMs,
  nextDeliveryCount: envelope.deliveryCount + 1,
  reconsumeTimes: envelope.deliveryCount - 1,
  error: new Error('handler failed'),
});

/** The proxied transport, topic and group of the running test. */
export interface PitfallPlace {
  readonly proxied: ProxiedKafka;
  readonly topic: string;
  readonly group: string;
}

/** The subscriptions a test opens, closed after it, and what it reads of its topic and group. */
export interface PitfallScope {
  readonly subscriptions: Subscription[];
  /** The group's committed offset of one partition (-1 when none), read the way Kafka tools read it. */
  readonly committed: (partition: number) => Promise<bigint>;
  /** `count` records of one ordering key (so one partition), published one after another. */
  readonly publishToOnePartition: (
    count: number,
  ) => Promise<{ receipts: PublishReceipt[]; partition: number; first: bigint }>;
  /** When each commit request of this group started, from the client's own trace, until `stop()`. */
  readonly commitStarts: () => { starts: number[]; stop: () => void };
}

/**
 * Before each test of the calling describe: a transport behind a new proxy, a new topic and group, handed
 * to `opened`. After it: its subscriptions closed, the proxy closed and the topic deleted.
 */
export function kafkaPitfallScope(opened: (place: PitfallPlace) => void): PitfallScope {
  let proxied: ProxiedKafka;
  let topic: string;
  let group: string;
  const subscriptions: Subscription[] = [];

  beforeEach(async () => {
    proxied = await proxiedKafka(kafka.bootstrap);
    topic = `pitfalls-${randomUUID().slice(0, 8)}`;
    group = `g-${randomUUID().slice(0, 8)}`;
    opened({ proxied, topic, group });
  });

  afterEach(async () => {
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    await proxied.close();
    await deleteTopics(kafka.bootstrap, [topic]).catch(() => undefined);
  });

  const committed = async (partition: number): Promise<bigint> => {
    const reader = new Consumer({
      clientId: 'oncemq-test',
      bootstrapBrokers: [kafka.bootstrap],
      groupId: group,
    });
    try {
      const offsets = await reader.listCommittedOffsets({ topics: [{ topic, partitions: [partition] }] });
      return offsets.get(topic)?.[partition] ?? -1n;
    } finally {
      await reader.close();
    }
  };

  const publishToOnePartition = async (
    count: number,
  ): Promise<{ receipts: PublishReceipt[]; partition: number; first: bigint }> => {
    const receipts: PublishReceipt[] = [];
    for (let i = 0; i < count; i++)
      receipts.push(await proxied.transport.publish({ topic, key: `k-${i}`, orderingKey: 'one', body: {} }));
    return {
      receipts,
      partition: Number(receipts[0]?.position?.partition),
      first: BigInt(receipts[0]?.position?.offset ?? -1),
    };
  };

  const commitStarts = (): { starts: number[]; stop: () => void } => {
    const starts: number[] = [];
    const onCommit = (context: unknown): void => {
      if ((context as { client?: { groupId?: string } }).client?.groupId === group) starts.push(Date.now());
    };
    listen('tracing:plt:kafka:consumer:commits:start', onCommit);
    return { starts, stop: () => stopListening('tracing:plt:kafka:consumer:commits:start', onCommit) };
  };

  return { subscriptions, committed, publishToOnePartition, commitStarts };
}
