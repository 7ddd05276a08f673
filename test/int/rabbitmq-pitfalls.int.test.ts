// The RabbitMQ pitfalls of TRANSPORTS.md that lose or double messages, one case each, against the
// real broker (reached through a TCP proxy of the test's own for connection faults).
import amqplib from 'amqplib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KEY_HEADER, TransportUnavailableError, UNIQUE_ID_HEADER, type Envelope } from 'oncemq';
import type { RabbitTransport } from 'oncemq/rabbitmq';
import { UnconfirmedPublishError, type RabbitSubscription } from 'oncemq/rabbitmq';
import { findRabbit, rabbitWorld, type RabbitWorld } from '../support/rabbitmq.js';
import {
  outcomeFor,
  sleep,
  RABBIT_TOPIC_HEADER as TOPIC_HEADER,
  waitFor,
  type Answer,
} from '../support/internal.js';

const service = await findRabbit();

const keyOf = (envelope: Envelope): string => envelope.headers[KEY_HEADER] ?? '';
const until = (condition: () => boolean | Promise<boolean>, what: string): Promise<void> =>
  waitFor(condition, what, 15_000);

/** A channel on a direct connection (not through the proxy), for what an operator would do. */
async function operator(): Promise<{ channel: amqplib.Channel; close: () => Promise<void> }> {
  const connection = await amqplib.connect(service.url);
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  return { channel, close: () => connection.close() };
}

describe.skipIf(!service.available)('RabbitMQ pitfalls', () => {
  let world: RabbitWorld;
  let transport: RabbitTransport;
  const topic = 'payments';
  const group = 'points';

  beforeEach(async () => {
    world = await rabbitWorld(service.url, { delayLevels: ['100ms', '250ms', '2s'] });
    transport = world.transport;
  });

  afterEach(async () => {
    await world.cleanup();
  });

  /** Subscribes with a processor answering by hand (no ledger). */
  const subscribe = (
    answer: (envelope: Envelope) => Answer | Promise<Answer>,
    delayMs = 100,
    on: RabbitTransport = transport,
  ): Promise<RabbitSubscription> =>
    on.subscribe(group, [topic], async (envelope) => outcomeFor(envelope, await answer(envelope), delayMs), {
      concurrency: 4,
    });

  it('settles a delivery whose channel was lost nowhere: the new channel never sees its dead tag (#1)', async () => {
    await transport.publish({ topic, key: 'held', body: {} });
    const seen: Envelope[] = [];
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const subscription = await subscribe(async (envelope): Promise<Answer> => {
      seen.push(envelope);
      if (seen.length === 1) await released;
      return 'ack';
    });
    await until(() => seen.length === 1, 'the first delivery');
    expect(await seen[0]?.keepAlive?.extend().then(() => 'open')).toBe('open');
    world.proxy.dropConnections();
    await until(() => seen.length === 2, 'the redelivery on the new channel');
    expect(seen[1]?.brokerId).toBe(seen[0]?.brokerId);
    // The first handler ends now, after its channel died: its ack must not reach the new channel.
    await expect(seen[0]?.keepAlive?.extend()).rejects.toThrow(/channel of this delivery closed/);
    release();
    await sleep(300);
    await transport.publish({ topic, key: 'after', body: {} });
    await until(() => seen.some((envelope) => keyOf(envelope) === 'after'), 'the next message');
    await sleep(500);
    // A stale ack on the new channel would close it (406 unknown delivery tag) and open a third.
    expect(subscription.channels).toBe(2);
    expect(seen.map(keyOf)).toEqual(['held', 'held', 'after']);
  });

  it('re-declares its queue and consumes again after the server cancels the consumer (#2)', async () => {
    const seen: string[] = [];
    const subscription = await subscribe((envelope) => (seen.push(keyOf(envelope)), 'ack'));
    await transport.publish({ topic, key: 'before', body: {} });
    await until(() => seen.length === 1, 'the first delivery');
    const admin = await operator();
    try {
      await admin.channel.deleteQueue(transport.names.work(group));
    } finally {
      await admin.close();
    }
    await until(() => subscription.channels === 2, 'a new consumer');
    await transport.publish({ topic, key: 'after', body: {} });
    await until(() => seen.includes('after'), 'a delivery from the re-declared queue');
  });

  it('retries through a new copy in a retry queue, never a requeue: the charged count is in its header (#4)', async () => {
    await transport.publish({ topic, key: 'k', body: {} });
    const seen: Envelope[] = [];
    await subscribe((envelope) => (seen.push(envelope), seen.length === 1 ? 'retry' : 'ack'));
    await until(() => seen.length === 2, 'the retry');
    expect(seen.map((envelope) => envelope.deliveryCount)).toEqual([1, 2]);
    // A new stored copy: another broker id, and the broker counts no earlier delivery of it.
    expect(seen[1]?.brokerId).not.toBe(seen[0]?.brokerId);
    expect(seen[1]?.brokerDeliveryCount).toBe(1);
    // It keeps the first publish time (AMQP timestamps are seconds).
    expect(Date.now() - (seen[0]?.publishedAt?.getTime() ?? 0)).toBeLessThan(60_000);
    expect(seen[1]?.publishedAt).toEqual(seen[0]?.publishedAt);
  });

  it('hands a delivery whose processor threw back after a backoff, uncharged: never a hot requeue loop (#4)', async () => {
    await transport.publish({ topic, key: 'k', body: {} });
    const seen: { at: number; envelope: Envelope }[] = [];
    await transport.subscribe(group, [topic], (envelope) => {
      seen.push({ at: Date.now(), envelope });
      if (seen.length < 3) return Promise.reject(new Error('processor down'));
      return Promise.resolve(outcomeFor(envelope, 'ack', 0));
    });
    await until(() => seen.length === 3, 'the copy twice again');
    expect(seen.map(({ envelope }) => envelope.deliveryCount)).toEqual([1, 1, 1]);
    expect(new Set(seen.map(({ envelope }) => envelope.brokerId)).size).toBe(1);
    if (transport.quorum) {
      expect(seen.map(({ envelope }) => envelope.brokerDeliveryCount)).toEqual([1, 2, 3]);
    }
    // failureBackoff is 100ms here, doubled for the second failure in a row.
    expect((seen[1]?.at ?? 0) - (seen[0]?.at ?? 0)).toBeGreaterThanOrEqual(90);
    expect((seen[2]?.at ?? 0) - (seen[1]?.at ?? 0)).toBeGreaterThanOrEqual(180);
  });

  it('dead-letters its retry queues at least once: quorum retry queues with reject-publish (#5)', async (ctx) => {
    if (!transport.quorum) ctx.skip();
    await transport.publish({ topic, key: 'k', body: {} });
    let count = 0;
    await subscribe(() => (++count === 1 ? 'retry' : 'ack'));
    await until(() => count === 2, 'the retry');
    const admin = await operator();
    try {
      // A passive re-declare with the same arguments succeeds only if the queue has exactly them.
      const declared = admin.channel.assertQueue(transport.names.retry(group, 100), {
        durable: true,
        arguments: {
          'x-queue-type': 'quorum',
          'x-message-ttl': 100,
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': transport.names.work(group),
          'x-dead-letter-strategy': 'at-least-once',
          'x-overflow': 'reject-publish',
        },
      });
      await expect(declared).resolves.toMatchObject({ queue: transport.names.retry(group, 100) });
    } finally {
      await admin.close();
    }
  });

  it('keeps one retry queue per delay level: a long delay never holds back a short one (#6)', async () => {
    await transport.publish({ topic, key: 'slow', body: {} });
    await transport.publish({ topic, key: 'fast', body: {} });
    const retried: string[] = [];
    const first = new Set<string>();
    await transport.subscribe(group, [topic], (envelope) => {
      const key = keyOf(envelope);
      if (first.has(key)) {
        retried.push(key);
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      }
      first.add(key);
      return Promise.resolve(outcomeFor(envelope, 'retry', key === 'slow' ? 2000 : 100));
    });
    await until(() => retried.length === 2, 'both retries');
    expect(retried).toEqual(['fast', 'slow']);
  });

  it('waits out a delay longer than its longest level by going round again until due', async () => {
    const short = world.open({ delayLevels: ['100ms', '200ms'] });
    await short.publish({ topic, key: 'k', body: {} });
    const at: number[] = [];
    await subscribe(() => (at.push(Date.now()), at.length === 1 ? 'retry' : 'ack'), 700, short);
    await until(() => at.length === 2, 'the retry');
    expect((at[1] ?? 0) - (at[0] ?? 0)).toBeGreaterThanOrEqual(700);
  });

  it('refuses an unroutable publish instead of confirming it as stored (#7)', async () => {
    const bare = world.open({ retention: false });
    const publish = bare.publish({ topic: 'nobody-listens', key: 'k', body: {} });
    await expect(publish).rejects.toBeInstanceOf(UnconfirmedPublishError);
    await expect(publish).rejects.toMatchObject({ reason: 'unroutable' });
  });

  it('sends a nacked publish again after a pause, not in the same millisecond: a full queue that rejects publishes takes the copy once it has room', async () => {
    const bare = world.open({ retention: false });
    // Declares the exchange (the topic has no queue yet: unroutable).
    await bare.publish({ topic: 'full-topic', key: 'x', body: {} }).catch(() => undefined);
    const { channel, close } = await operator();
    // A queue of one message that nacks a publish when full (RabbitMQ nacks a copy routed to a quorum
    // queue being deleted the same way: a partition-count drain deletes old queues under publishers).
    const queue = `${world.prefix}.full`;
    try {
      await channel.assertQueue(queue, {
        durable: true,
        arguments: { 'x-queue-type': 'classic', 'x-max-length': 1, 'x-overflow': 'reject-publish' },
      });
      await channel.bindQueue(queue, world.prefix, 'full-topic');
      await bare.publish({ topic: 'full-topic', key: 'a', body: {} });
      const second = bare.publish({ topic: 'full-topic', key: 'b', body: {} });
      await sleep(20);
      expect(await channel.get(queue, { noAck: true })).not.toBe(false);
      await expect(second).resolves.toMatchObject({ topic: 'full-topic' });
      const stored = await channel.get(queue, { noAck: true });
      expect(stored === false ? undefined : stored.properties.headers?.[KEY_HEADER]).toBe('b');
    } finally {
      await channel.deleteQueue(queue).catch(() => undefined);
      await close();
    }
  });

  it('stores every publish persistent, with the key, the caller’s headers, a unique id, the topic and its exact bytes', async () => {
    await transport.publish({ topic, key: 'warm', body: {} });
    const admin = await operator();
    try {
      const { queue } = await admin.channel.assertQueue('', { exclusive: true });
      await admin.channel.bindQueue(queue, transport.settings.exchange, topic);
      const receipt = await transport.publish({
        topic,
        key: 'order-1',
        headers: { 'x-trace': 'abc' },
        // A view into a larger buffer: only its own bytes are sent.
        body: new TextEncoder().encode('xx{"n":1}yy').subarray(2, 9),
      });
      const got = await admin.channel.get(queue, { noAck: true });
      if (got === false) throw new Error('the publish is not in the queue');
      expect(got.properties.deliveryMode).toBe(2);
      expect(got.properties.messageId).toBe(receipt.brokerId);
      expect(got.properties.headers).toMatchObject({
        [KEY_HEADER]: 'order-1',
        'x-trace': 'abc',
        [UNIQUE_ID_HEADER]: receipt.messageId,
        [TOPIC_HEADER]: topic,
      });
      expect(got.content.toString()).toBe('{"n":1}');
    } finally {
      await admin.close();
    }
  });

  it('acks a retried delivery only once its copy is stored: a returned copy leaves the original to come back (#7)', async () => {
    await transport.publish({ topic, key: 'k', body: {} });
    const seen: Envelope[] = [];
    let deleted: () => void = () => undefined;
    const gone = new Promise<void>((resolve) => (deleted = resolve));
    await subscribe(async (envelope): Promise<Answer> => {
      seen.push(envelope);
      if (seen.length === 2) await gone;
      return envelope.deliveryCount < 3 ? 'retry' : 'ack';
    });
    await until(() => seen.length === 2, 'the first retry');
    // An operator deletes the retry queue: the next retry copy is returned, not stored.
    const admin = await operator();
    try {
      await admin.channel.deleteQueue(transport.names.retry(group, 100));
    } finally {
      await admin.close();
    }
    deleted();
    await until(() => seen.length === 4, 'the original again, then its retry');
    expect(seen.map((envelope) => envelope.deliveryCount)).toEqual([1, 2, 2, 3]);
    expect(seen[2]?.brokerId).toBe(seen[1]?.brokerId);
  });

  it('acks a dead-lettered delivery only once its dead letter is stored (#7)', async () => {
    await transport.publish({ topic, key: 'poison', body: {} });
    const seen: Envelope[] = [];
    await subscribe((envelope) => (seen.push(envelope), 'dead-letter'));
    await until(() => seen.length === 1, 'the first delivery');
    await until(async () => (await transport.deadLetters.list({ group })).length === 1, 'the dead letter');
    const admin = await operator();
    try {
      await admin.channel.deleteQueue(transport.names.dead(group));
      await transport.publish({ topic, key: 'poison-2', body: {} });
      await until(() => seen.length === 3, 'the second poison, returned and delivered again');
    } finally {
      await admin.close();
    }
    expect(seen.map(keyOf)).toEqual(['poison', 'poison-2', 'poison-2']);
    expect(seen[2]?.brokerId).toBe(seen[1]?.brokerId);
    await until(async () => (await transport.deadLetters.list({ group })).length === 1, 'its dead letter');
  });

  it('keeps reason, last error, original queue, attempt and x-death on a dead letter', async () => {
    await transport.publish({ topic, key: 'poison', body: { n: 1 } });
    await subscribe((envelope) => (envelope.deliveryCount < 2 ? 'retry' : 'dead-letter'));
    await until(async () => (await transport.deadLetters.list({ group })).length === 1, 'the dead letter');
    const [letter] = await transport.deadLetters.list({ group });
    expect(letter).toMatchObject({
      group,
      topic,
      key: 'poison',
      reason: 'permanent-error',
      deliveryCount: 2,
    });
    expect(letter?.error).toMatch(/conformance: poison on two lines/);
    expect(letter?.details).toMatchObject({
      originalQueue: transport.names.work(group),
      xDeath: [expect.objectContaining({ queue: transport.names.retry(group, 100), reason: 'expired' })],
    });
  });

  it('makes a publish during an outage wait for the connection, and fail clearly past publishTimeout', async () => {
    await transport.publish({ topic, key: 'warm', body: {} });
    const outage = world.proxy.outage(600);
    const receipt = await transport.publish({ topic, key: 'during', body: {} });
    await outage;
    expect(receipt.brokerId).not.toBe('');

    const impatient = world.open({ publishTimeout: '300ms' });
    await impatient.publish({ topic, key: 'warm', body: {} });
    world.proxy.refuse(true);
    world.proxy.dropConnections();
    try {
      await expect(impatient.publish({ topic, key: 'lost?', body: {} })).rejects.toBeInstanceOf(
        TransportUnavailableError,
      );
    } finally {
      world.proxy.refuse(false);
    }
    const seen: string[] = [];
    await subscribe((envelope) => (seen.push(keyOf(envelope)), 'ack'));
    await until(() => seen.includes('during'), 'the message published during the outage');
  });

  it("creates nothing with topology 'check', and names what is missing", async () => {
    const checking = world.open({ topology: 'check', prefix: `${world.prefix}-absent` });
    await expect(
      checking.subscribe(group, [topic], () => Promise.reject(new Error('never'))),
    ).rejects.toThrow(/does not exist on the broker/);
    await expect(checking.deadLetters.list({ group })).rejects.toThrow(
      new RegExp(`queue '${world.prefix}-absent\\.${group}@dead' does not exist`),
    );
    for (const missing of [
      (channel: amqplib.Channel) => channel.checkQueue(checking.names.dead(group)),
      (channel: amqplib.Channel) => channel.checkExchange(checking.settings.exchange),
    ]) {
      const admin = await operator();
      try {
        await expect(missing(admin.channel)).rejects.toThrow(/404/);
      } finally {
        await admin.close();
      }
    }
  });
});
