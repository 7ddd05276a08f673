import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { KEY_HEADER, type Envelope, type Outcome } from 'oncemq';
import { RocketMQTransport, type RocketMQSubscription } from 'oncemq/rocketmq';
import { findRocketMQ } from '../support/brokers.js';
import { ConnectProxy, routeGrpcThrough } from '../support/connect-proxy.js';
import { ackOutcome, outcomeBase } from '../support/local-points.js';
import { sleep } from '../support/points.js';
import { QUICK_ROCKETMQ } from '../support/rocketmq.js';

const broker = await findRocketMQ();

/** Cuts, each with every consumer's receive waiting at the proxy, and the messages published after each. */
const ROUNDS = 15;
const BURST = 8;
const CONSUMERS = 4;

describe.skipIf(!broker.available)('RocketMQ: receives cut while they wait at the proxy', () => {
  const closers: (() => Promise<void>)[] = [];

  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('every message the proxy took for a receive whose connection was gone comes back', async () => {
    const topic = `cut-receive-${randomUUID().slice(0, 8)}`;
    const group = `points-${randomUUID().slice(0, 8)}`;
    // The producer's channel is made before the route: only the consumers' connections are cut.
    const producer = new RocketMQTransport({ url: broker.url, ...QUICK_ROCKETMQ });
    closers.push(() => producer.close());
    await producer.publish({ topic, key: 'first', body: {} });
    const proxy = await ConnectProxy.start();
    closers.push(() => proxy.close());
    const undoRoute = routeGrpcThrough(proxy);
    closers.push(() => {
      undoRoute();
      return Promise.resolve();
    });
    const consumer = new RocketMQTransport({ url: broker.url, ...QUICK_ROCKETMQ, longPoll: '5s' });
    closers.push(() => consumer.close());
    const seen = new Set<string>();
    const ack = (envelope: Envelope): Promise<Outcome> => {
      seen.add(envelope.headers[KEY_HEADER] ?? envelope.brokerId);
      return Promise.resolve(ackOutcome(envelope, outcomeBase(envelope, group)));
    };
    const subscriptions: RocketMQSubscription[] = [];
    for (let i = 0; i < CONSUMERS; i++) {
      subscriptions.push(await consumer.subscribe(group, [topic], { process: ack }, { visibility: '5s' }));
    }
    await sleep(3000);
    const sent: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await sleep(700); // the topic is empty: every consumer's receive is waiting at the proxy
      proxy.drop();
      const keys = Array.from({ length: BURST }, (_, i) => `r${round}-m${i}`);
      await Promise.all(keys.map((key) => producer.publish({ topic, key, body: {} })));
      sent.push(...keys);
    }
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && sent.some((key) => !seen.has(key))) await sleep(500);
    expect(sent.filter((key) => !seen.has(key))).toEqual([]);
  }, 180_000);
});
