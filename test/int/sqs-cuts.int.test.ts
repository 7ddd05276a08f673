import { GetQueueAttributesCommand, ListQueuesCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from 'oncemq';
import { findElasticMQ } from '../support/brokers.js';
import { keyOf, outcomeFor, sleep, unique, waitFor } from '../support/internal.js';
import { sqsClient, sqsUnderTest, type SqsUnderTest } from '../support/sqs.js';

const broker = await findElasticMQ();

/** Messages stored in the queues of `namespace`, visible or in flight. */
async function storedMessages(namespace: string): Promise<number> {
  const client = sqsClient(broker.url);
  try {
    const page = await client.send(new ListQueuesCommand({ QueueNamePrefix: `${namespace}_` }));
    let total = 0;
    for (const url of page.QueueUrls ?? []) {
      const answer = await client.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      total +=
        Number(answer.Attributes?.ApproximateNumberOfMessages ?? 0) +
        Number(answer.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
    }
    return total;
  } finally {
    client.destroy();
  }
}

describe.skipIf(!broker.available)('SqsTransport: connections cut, deletes lost, publishes too large', () => {
  let under: SqsUnderTest;
  afterEach(async () => {
    await under.transport.close();
    await under.cleanup?.();
  });

  it('sends every call through its endpoint (the proxy), not to the host of the queue URLs ElasticMQ returns; a call cut on every attempt is a TransportUnavailableError', async () => {
    under = await sqsUnderTest(broker.url);
    const topic = unique('via');
    await under.transport.publish({ topic, key: 'k-1', body: {} });
    under.proxy.refuse(true);
    under.proxy.dropConnections();
    // Every attempt cut: a TransportUnavailableError, which a caller tries again after, as after an outage.
    await expect(under.transport.publish({ topic, key: 'k-2', body: {} })).rejects.toMatchObject({
      name: 'TransportUnavailableError',
      message: expect.stringMatching(/connection to SQS at .* was cut/) as unknown,
    });
    under.proxy.refuse(false);
    await under.transport.publish({ topic, key: 'k-3', body: {} });
  });

  it('a delete lost to an outage leaves the message to SQS: the same copy comes back once the visibility ends', async () => {
    under = await sqsUnderTest(broker.url);
    const topic = unique('lost-delete');
    const group = unique('g');
    const receipt = await under.transport.publish({ topic, key: 'lost-delete', body: {} });
    const seen: Envelope[] = [];
    const subscription = await under.transport.subscribe(
      group,
      [topic],
      (envelope) => {
        seen.push(envelope);
        // The effect is committed; the network goes before the delete reaches SQS, for longer than the
        // SDK's retries of it last, and comes back before the message's visibility ends.
        if (seen.length === 1) void under.proxy.outage(1500);
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      },
      { visibility: '3s', from: 'earliest' },
    );
    await waitFor(() => seen.length >= 2, 'the copy again', 20_000);
    expect(seen[1]).toMatchObject({ brokerId: receipt.brokerId, topic });
    expect(keyOf(seen[1] as Envelope)).toBe('lost-delete');
    // Its second delete went through: it does not come a third time.
    await sleep(4000);
    expect(seen).toHaveLength(2);
    await subscription.close();
  });

  it('refuses a publish over 256 KiB with its attributes as a ConfigError naming the size, storing nothing (ElasticMQ would take it)', async () => {
    under = await sqsUnderTest(broker.url);
    const topic = unique('large');
    const group = unique('g');
    // A group queue, so that a copy stored anywhere would be counted.
    const ack = (envelope: Envelope): Promise<ReturnType<typeof outcomeFor>> =>
      Promise.resolve(outcomeFor(envelope, 'ack', 0));
    await (await under.transport.subscribe(group, [topic], ack)).close();
    // The body alone fits SQS's 262 144 bytes; with the header it does not. ElasticMQ counts only bodies.
    const large = under.transport.publish({
      topic,
      key: 'large',
      body: new Uint8Array(200_000).fill(0x61),
      headers: { 'x-large': 'b'.repeat(70_000) },
    });
    await expect(large).rejects.toMatchObject({ name: 'ConfigError', field: 'body' });
    await expect(large).rejects.toThrow(/more than SQS's 262144/);
    await expect(
      under.transport.publish({ topic, key: 'too-long', body: new Uint8Array(262_145).fill(0x61) }),
    ).rejects.toThrow(/more than SQS's 262144/);
    expect(await storedMessages(under.namespace)).toBe(0);
  });
});
