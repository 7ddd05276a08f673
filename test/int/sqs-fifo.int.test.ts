import { afterEach, describe, expect, it } from 'vitest';
import type { Subscription, Transport } from 'oncemq';
import { findElasticMQ } from '../support/brokers.js';
import { keyOf, outcomeFor, sleep, unique, waitFor } from '../support/internal.js';
import { sqsUnderTest } from '../support/sqs.js';

const broker = await findElasticMQ();

describe.skipIf(!broker.available)('SqsTransport FIFO: the message group is the ordering key', () => {
  const closing: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  it('keeps a key from a second member while its first message is retried: the next one waits, in SQS itself', async () => {
    const under = await sqsUnderTest(broker.url, { fifo: true });
    closing.push(async () => {
      await under.transport.close();
      await under.cleanup?.();
    });
    const peer = (await under.peer?.()) as Transport;
    closing.push(() => peer.close());
    const topic = unique('fifo');
    const group = unique('g');
    const order: string[] = [];
    let retried = false;
    const members: Subscription[] = [];
    for (const transport of [under.transport, peer]) {
      members.push(
        await transport.subscribe(
          group,
          [topic],
          async (envelope) => {
            const key = keyOf(envelope) ?? '';
            if (key === 'k-0' && !retried) {
              retried = true;
              return outcomeFor(envelope, 'retry', 1500);
            }
            order.push(key);
            await sleep(50);
            return outcomeFor(envelope, 'ack', 0);
          },
          { ordering: {}, concurrency: 1, visibility: '5s' },
        ),
      );
    }
    closing.push(() => Promise.all(members.map((member) => member.close())).then(() => undefined));
    // Each message its own business key, one ordering key: a group made from the business key lets the
    // second member take k-1 while k-0 waits for its retry.
    for (let i = 0; i < 4; i++) {
      await under.transport.publish({ topic, key: `k-${i}`, orderingKey: 'customer-1', body: { i } });
    }
    await waitFor(() => order.length >= 4, 'every message', 30_000);
    expect(order).toEqual(['k-0', 'k-1', 'k-2', 'k-3']);
  }, 60_000);
});
