// A producer that is not oncemq's publishes to a topic's subject with the NATS client, carrying oncemq's
// own headers with values oncemq never writes: a bad delivery count is a dead letter naming the header,
// and the retry headers, read on the group's retry stream only, change nothing on a topic stream.
import { jetstream } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { DELIVERY_COUNT_HEADER, KEY_HEADER, type Envelope } from 'oncemq';
import { directConnection, NATS_SERVICE, natsTestBed, type NatsUnderTest } from '../support/nats.js';
import { findService } from '../support/services.js';
import {
  outcomeFor,
  NATS_RETRY_DUE_HEADER as RETRY_DUE_HEADER,
  NATS_RETRY_TOPIC_HEADER as RETRY_TOPIC_HEADER,
  waitFor,
} from '../support/internal.js';

const service = await findService(NATS_SERVICE);

describe.skipIf(!service.available)('NATS: oncemq headers from a foreign producer', () => {
  const bed = natsTestBed(service.url);

  async function foreignPublish(
    under: NatsUnderTest,
    set: Record<string, string>,
    subject = `${under.subjectPrefix}.payments`,
  ): Promise<void> {
    const producer = await directConnection(service.url);
    try {
      const headers = natsHeaders();
      for (const [name, value] of Object.entries(set)) headers.set(name, value);
      await jetstream(producer).publish(subject, '{"n":1}', { headers });
    } finally {
      await producer.close();
    }
  }

  async function subscribeAcking(under: NatsUnderTest): Promise<Envelope[]> {
    const seen: Envelope[] = [];
    await under.transport.subscribe('points', ['payments'], (envelope) => {
      seen.push(envelope);
      return Promise.resolve(outcomeFor(envelope, 'ack', 0));
    });
    return seen;
  }

  it('dead-letters a message whose oncemq-delivery-count is larger than any count oncemq writes', async () => {
    const under = await bed.open();
    const seen = await subscribeAcking(under);
    await foreignPublish(under, { [KEY_HEADER]: 'foreign', [DELIVERY_COUNT_HEADER]: '999999999' });
    const letters = () => under.transport.deadLetters.list({ group: 'points' });
    await waitFor(async () => (await letters()).length > 0, 'the dead letter', 5_000);
    const [letter] = await letters();
    expect(letter).toMatchObject({ reason: 'invalid-header', key: 'foreign', topic: 'payments' });
    expect(letter?.error).toContain(`'${DELIVERY_COUNT_HEADER}' = "999999999"`);
    expect(seen).toHaveLength(0);
  });

  it('reads a valid oncemq-delivery-count as the attempt', async () => {
    const under = await bed.open();
    const seen = await subscribeAcking(under);
    await foreignPublish(under, { [KEY_HEADER]: 'foreign', [DELIVERY_COUNT_HEADER]: '3' });
    await waitFor(() => seen.length === 1, 'the delivery', 5_000);
    expect(seen[0]?.deliveryCount).toBe(3);
  });

  it('processes at once a message on a topic stream carrying a far-future retry due time: not read there', async () => {
    const under = await bed.open();
    const seen = await subscribeAcking(under);
    const due = String(Date.now() + 365 * 24 * 3_600_000);
    await foreignPublish(under, { [KEY_HEADER]: 'foreign', [RETRY_DUE_HEADER]: due });
    await waitFor(() => seen.length === 1, 'the delivery', 5_000);
    expect(seen[0]?.headers[RETRY_DUE_HEADER]).toBeUndefined();
  });

  async function theDeadLetter(under: NatsUnderTest): Promise<{ reason: string; error: string }> {
    const letters = () => under.transport.deadLetters.list({ group: 'points' });
    await waitFor(async () => (await letters()).length > 0, 'the dead letter', 5_000);
    const [letter] = await letters();
    return letter as { reason: string; error: string };
  }

  it("dead-letters a copy on the group's retry subject whose due time is a year away instead of holding it back a year", async () => {
    const under = await bed.open();
    const seen = await subscribeAcking(under);
    const due = String(Date.now() + 365 * 24 * 3_600_000);
    await foreignPublish(
      under,
      { [KEY_HEADER]: 'foreign', [RETRY_TOPIC_HEADER]: 'payments', [RETRY_DUE_HEADER]: due },
      `${under.subjectPrefix}-retry.points`,
    );
    const letter = await theDeadLetter(under);
    expect(letter.reason).toBe('invalid-header');
    expect(letter.error).toContain(`'${RETRY_DUE_HEADER}' = "${due}"`);
    expect(seen).toHaveLength(0);
  });

  it("dead-letters a copy on the group's retry subject naming a topic the group does not take", async () => {
    const under = await bed.open();
    const seen = await subscribeAcking(under);
    await foreignPublish(
      under,
      { [KEY_HEADER]: 'foreign', [RETRY_TOPIC_HEADER]: 'salaries', [RETRY_DUE_HEADER]: String(Date.now()) },
      `${under.subjectPrefix}-retry.points`,
    );
    const letter = await theDeadLetter(under);
    expect(letter.reason).toBe('invalid-header');
    expect(letter.error).toContain(`'${RETRY_TOPIC_HEADER}' = "salaries"`);
    expect(seen).toHaveLength(0);
  });
});
