// A producer that is not oncemq's sends messages carrying oncemq's own headers with values oncemq never
// writes, straight through amqplib: each ends as a dead letter naming the header, never as a loop
// between the work queue and a retry queue, and never as an instruction.
import amqplib from 'amqplib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DELIVERY_COUNT_HEADER, KEY_HEADER, type Envelope } from 'oncemq';
import type { RabbitTransport } from 'oncemq/rabbitmq';
import { findRabbit, rabbitWorld, type RabbitWorld } from '../support/rabbitmq.js';
import {
  outcomeFor,
  RABBIT_RETRY_DUE_HEADER as RETRY_DUE_HEADER,
  sleep,
  RABBIT_TOPIC_HEADER as TOPIC_HEADER,
  waitFor,
} from '../support/internal.js';

const service = await findRabbit();

describe.skipIf(!service.available)('RabbitMQ: oncemq headers from a foreign producer', () => {
  let world: RabbitWorld;
  let transport: RabbitTransport;
  const topic = 'payments';
  const group = 'points';

  beforeEach(async () => {
    world = await rabbitWorld(service.url, { delayLevels: ['100ms', '250ms', '1s'] });
    transport = world.transport;
  });

  afterEach(async () => {
    await world.cleanup();
  });

  /** Publishes with amqplib, as another producer would: to the exchange, or straight to a queue. */
  async function foreignPublish(
    headers: Record<string, unknown>,
    to: { queue: string } | { routingKey: string } = { routingKey: topic },
  ): Promise<void> {
    const connection = await amqplib.connect(service.url);
    try {
      const channel = await connection.createConfirmChannel();
      const body = Buffer.from('{"n":1}');
      if ('queue' in to) channel.sendToQueue(to.queue, body, { headers, persistent: true });
      else channel.publish(world.prefix, to.routingKey, body, { headers, persistent: true });
      await channel.waitForConfirms();
    } finally {
      await connection.close();
    }
  }

  /** Subscribes a processor that acks every delivery and records it. */
  async function subscribeAcking(): Promise<Envelope[]> {
    const seen: Envelope[] = [];
    await transport.subscribe(group, [topic, 'refunds'], (envelope) => {
      seen.push(envelope);
      return Promise.resolve(outcomeFor(envelope, 'ack', 0));
    });
    return seen;
  }

  /** Waits for the only dead letter of the group and checks it is an `invalid-header` one naming `header`. */
  async function expectInvalidHeader(header: string, value: string): Promise<void> {
    await waitFor(
      async () => (await transport.deadLetters.list({ group })).length > 0,
      `a dead letter for the bad ${header}`,
      5_000,
    );
    const letters = await transport.deadLetters.list({ group });
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({ reason: 'invalid-header', key: 'foreign' });
    expect(letters[0]?.error).toContain(`'${header}' = ${JSON.stringify(value)}`);
  }

  it('dead-letters a message whose oncemq-retry-due is far in the future instead of parking it for ever', async () => {
    const seen = await subscribeAcking();
    const due = String(Date.now() + 365 * 24 * 3_600_000);
    await foreignPublish({ [KEY_HEADER]: 'foreign', [RETRY_DUE_HEADER]: due });
    await expectInvalidHeader(RETRY_DUE_HEADER, due);
    expect(seen).toHaveLength(0);
    // Not parked in a retry queue either: nothing comes back once the longest level has passed.
    await sleep(1_500);
    expect(seen).toHaveLength(0);
    expect(await transport.deadLetters.list({ group })).toHaveLength(1);
  });

  it('dead-letters a message whose oncemq-retry-due is not a time in epoch milliseconds', async () => {
    const seen = await subscribeAcking();
    await foreignPublish({ [KEY_HEADER]: 'foreign', [RETRY_DUE_HEADER]: 'tomorrow' });
    await expectInvalidHeader(RETRY_DUE_HEADER, 'tomorrow');
    expect(seen).toHaveLength(0);
  });

  it('processes at once a message whose oncemq-retry-due is in the past: it is due', async () => {
    const seen = await subscribeAcking();
    await foreignPublish({ [KEY_HEADER]: 'foreign', [RETRY_DUE_HEADER]: String(Date.now() - 60_000) });
    await waitFor(() => seen.length === 1, 'the delivery', 5_000);
    expect(seen[0]?.deliveryCount).toBe(1);
  });

  it('dead-letters a message whose oncemq-delivery-count is larger than any count oncemq writes', async () => {
    const seen = await subscribeAcking();
    await foreignPublish({ [KEY_HEADER]: 'foreign', [DELIVERY_COUNT_HEADER]: '999999999' });
    await expectInvalidHeader(DELIVERY_COUNT_HEADER, '999999999');
    expect(seen).toHaveLength(0);
  });

  it('dead-letters a message whose oncemq-delivery-count is not a whole number >= 1', async () => {
    const seen = await subscribeAcking();
    await foreignPublish({ [KEY_HEADER]: 'foreign', [DELIVERY_COUNT_HEADER]: '0' });
    await expectInvalidHeader(DELIVERY_COUNT_HEADER, '0');
    expect(seen).toHaveLength(0);
  });

  it('reads a valid oncemq-delivery-count sent as an AMQP integer as the attempt', async () => {
    const seen = await subscribeAcking();
    await foreignPublish({ [KEY_HEADER]: 'foreign', [DELIVERY_COUNT_HEADER]: 3 });
    await waitFor(() => seen.length === 1, 'the delivery', 5_000);
    expect(seen[0]?.deliveryCount).toBe(3);
  });

  it('dead-letters a message published to one topic whose oncemq-topic names another', async () => {
    const seen = await subscribeAcking();
    await foreignPublish({ [KEY_HEADER]: 'foreign', [TOPIC_HEADER]: 'refunds' });
    await expectInvalidHeader(TOPIC_HEADER, 'refunds');
    expect(seen).toHaveLength(0);
  });

  it('dead-letters a copy put in the work queue whose oncemq-topic names a topic the group does not take', async () => {
    const seen = await subscribeAcking();
    await foreignPublish(
      { [KEY_HEADER]: 'foreign', [TOPIC_HEADER]: 'salaries' },
      { queue: transport.names.work(group) },
    );
    await expectInvalidHeader(TOPIC_HEADER, 'salaries');
    expect(seen).toHaveLength(0);
  });

  it('processes a message published to its topic with an oncemq-topic naming that same topic', async () => {
    const seen = await subscribeAcking();
    await foreignPublish({ [KEY_HEADER]: 'foreign', [TOPIC_HEADER]: topic });
    await waitFor(() => seen.length === 1, 'the delivery', 5_000);
    expect(seen[0]?.topic).toBe(topic);
  });

  it('gives a foreign message copied from the topic log into a new group its topic, not the queue name', async () => {
    // The log exists once the topic is declared: a group subscribes, and a later group back-fills.
    await transport.subscribe('early', [topic], (envelope) =>
      Promise.resolve(outcomeFor(envelope, 'ack', 0)),
    );
    await foreignPublish({ [KEY_HEADER]: 'foreign' });
    const seen = await subscribeAcking();
    await waitFor(() => seen.length === 1, 'the back-filled copy', 5_000);
    expect(seen[0]?.topic).toBe(topic);
  });
});
