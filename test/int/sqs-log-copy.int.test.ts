// The copy of a topic's log into a new group's queue, on ElasticMQ: nothing SQS refuses is dropped unsaid.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { PermanentError, type Envelope, type Transport } from 'oncemq';
import { SqsTransport } from 'oncemq/sqs';
import { findElasticMQ } from '../support/brokers.js';
import { keyOf, outcomeFor, unique, waitFor } from '../support/internal.js';
import { sqsClient, sqsUnderTest } from '../support/sqs.js';

const broker = await findElasticMQ();

describe.skipIf(!broker.available)('SqsTransport: copying the log into a new group', () => {
  const closing: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  async function open(): Promise<{ transport: Transport; namespace: string }> {
    const namespace = `lc${randomUUID().slice(0, 8)}`;
    const under = await sqsUnderTest(broker.url, { namespace });
    closing.push(async () => {
      await under.transport.close();
      await under.cleanup?.();
    });
    return { transport: under.transport, namespace };
  }

  /** Subscribes `group` from the earliest message; answers the keys it received. */
  async function consume(transport: Transport, group: string, topic: string): Promise<string[]> {
    const keys: string[] = [];
    const subscription = await transport.subscribe(
      group,
      [topic],
      (envelope: Envelope) => {
        keys.push(keyOf(envelope) ?? '');
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      },
      { from: 'earliest' },
    );
    closing.push(() => subscription.close());
    return keys;
  }

  it('copies a message whose headers took all 10 attributes: the log id is packed in, not refused', async () => {
    const { transport } = await open();
    const topic = unique('t');
    const headers = Object.fromEntries(Array.from({ length: 9 }, (_, n) => [`h${n}`, `v${n}`]));
    await transport.publish({ topic, key: 'wide', headers, body: 'x' });
    await transport.publish({ topic, key: 'plain', body: 'y' });
    const keys = await consume(transport, unique('g'), topic);
    await waitFor(() => keys.length === 2, 'both messages copied and received', 15_000);
    expect(keys.sort()).toEqual(['plain', 'wide']);
  });

  it('fails the subscribe naming a log message SQS refuses in the group queue, and copies every other one', async () => {
    const { transport, namespace } = await open();
    const topic = unique('t');
    for (let n = 0; n < 12; n++) await transport.publish({ topic, key: `k-${n}`, body: { n } });
    const poison = await transport.publish({ topic, key: 'poison', body: { poison: true } });
    // A client whose copy of the poison message carries an attribute SQS refuses (an empty value):
    // SQS answers that entry in the batch's Failed list and stores the others.
    const client = sqsClient(broker.url);
    client.middlewareStack.add(
      (next) => async (args) => {
        const input = args.input as { Entries?: { MessageBody?: string; MessageAttributes?: object }[] };
        for (const entry of input.Entries ?? []) {
          if (entry.MessageBody?.includes('poison') === true) {
            entry.MessageAttributes = {
              ...entry.MessageAttributes,
              empty: { DataType: 'String', StringValue: '' },
            };
          }
        }
        return next(args);
      },
      { step: 'initialize', name: 'refuseThePoison' },
    );
    const copying = new SqsTransport({ client, namespace, longPoll: '1s' });
    closing.push(async () => {
      await copying.close();
      client.destroy();
    });
    const group = unique('g');
    const failure = consume(copying, group, topic);
    await expect(failure).rejects.toThrow(PermanentError);
    await expect(failure).rejects.toThrow(
      new RegExp(
        `SQS stored 12 of 13 messages; refused log message ${poison.brokerId}: InvalidAttributeValue \\(Attribute 'empty'`,
      ),
    );
    // The group's queue kept the other twelve: a member of the group receives them.
    const keys = await consume(transport, group, topic);
    await waitFor(() => keys.length === 12, 'the twelve copied messages', 15_000);
    expect(keys.sort()).toEqual(Array.from({ length: 12 }, (_, n) => `k-${n}`).sort());
  });
});
