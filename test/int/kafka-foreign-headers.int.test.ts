// A producer that is not oncemq's sends records carrying oncemq's own headers with values oncemq never
// writes, with @platformatic/kafka: each is a dead letter naming the header, not an instruction.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Producer } from '@platformatic/kafka';
import {
  DELIVERY_COUNT_HEADER,
  KEY_HEADER,
  UNIQUE_ID_HEADER,
  type Envelope,
  type Subscription,
} from 'oncemq';
import { findKafka } from '../support/brokers.js';
import { deleteTopics, proxiedKafka, type ProxiedKafka } from '../support/kafka.js';
import { ackOutcome, waitUntil } from '../support/local-points.js';

const kafka = await findKafka();

describe.skipIf(!kafka.available)('Kafka: oncemq headers from a foreign producer', () => {
  let proxied: ProxiedKafka;
  let topic: string;
  let group: string;
  const subscriptions: Subscription[] = [];

  beforeEach(async () => {
    proxied = await proxiedKafka(kafka.bootstrap);
    topic = `foreign-${randomUUID().slice(0, 8)}`;
    group = `g-${randomUUID().slice(0, 8)}`;
  });

  afterEach(async () => {
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    await proxied.close();
    await deleteTopics(kafka.bootstrap, [topic]).catch(() => undefined);
  });

  async function foreignSend(key: string, headers: Record<string, string>, to = topic): Promise<void> {
    // The topic exists once the transport published to it: a foreign record then lands beside.
    await proxied.transport.publish({ topic, key: 'first', body: { n: 0 } });
    const producer = new Producer({ clientId: 'oncemq-test', bootstrapBrokers: [kafka.bootstrap] });
    try {
      const map = new Map<Buffer, Buffer>();
      for (const [name, value] of Object.entries(headers)) map.set(Buffer.from(name), Buffer.from(value));
      await producer.send({
        messages: [{ topic: to, key: Buffer.from(key), value: Buffer.from('{"n":1}'), headers: map }],
      });
    } finally {
      await producer.close();
    }
  }

  async function subscribeAcking(): Promise<Envelope[]> {
    const seen: Envelope[] = [];
    const subscription = await proxied.transport.subscribe(group, [topic], (envelope) => {
      seen.push(envelope);
      return Promise.resolve(ackOutcome(envelope));
    });
    subscriptions.push(subscription);
    return seen;
  }

  async function theDeadLetter(): Promise<{
    reason: string;
    key?: string | null | undefined;
    error: string;
  }> {
    const list = () => proxied.transport.deadLetters.list({ group });
    await waitUntil(async () => (await list()).length > 0, 'the dead letter', 20_000);
    const [letter] = await list();
    return letter as { reason: string; key?: string | null | undefined; error: string };
  }

  it('dead-letters a record whose oncemq-delivery-count is larger than any count oncemq writes', async () => {
    await foreignSend('customer-9', { [KEY_HEADER]: 'foreign', [DELIVERY_COUNT_HEADER]: '999999999' });
    const seen = await subscribeAcking();
    const letter = await theDeadLetter();
    expect(letter).toMatchObject({ reason: 'invalid-header', key: 'foreign' });
    expect(letter.error).toContain(`'${DELIVERY_COUNT_HEADER}' = "999999999"`);
    expect(seen.map((envelope) => envelope.headers[KEY_HEADER])).toEqual(['first']);
  });

  it('dead-letters a record whose oncemq-unique-id is not a UUID instead of taking its record key for the business key', async () => {
    await foreignSend('customer-9', { [UNIQUE_ID_HEADER]: 'order-export-17' });
    const seen = await subscribeAcking();
    const letter = await theDeadLetter();
    expect(letter.reason).toBe('invalid-header');
    expect(letter.key ?? undefined).toBeUndefined();
    expect(letter.error).toContain(`'${UNIQUE_ID_HEADER}' = "order-export-17"`);
    expect(seen.map((envelope) => envelope.headers[KEY_HEADER])).toEqual(['first']);
  });

  it("dead-letters a record in the group's retry tier whose oncemq-original-topic is not one of the group's topics", async () => {
    const seen = await subscribeAcking();
    const tier = proxied.transport.settings.names.retryTopic(group, 0);
    await foreignSend('customer-9', { [KEY_HEADER]: 'foreign', 'oncemq-original-topic': 'salaries' }, tier);
    const letter = await theDeadLetter();
    expect(letter).toMatchObject({ reason: 'invalid-header', key: 'foreign' });
    expect(letter.error).toContain(`'oncemq-original-topic' = "salaries"`);
    expect(seen.map((envelope) => envelope.headers[KEY_HEADER])).toEqual(['first']);
  });
});
