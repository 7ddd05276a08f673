// A producer that is not oncemq's XADDs entries carrying oncemq's own fields with values oncemq never
// writes: a bad delivery count, or a retry stream copy naming a topic the group does not take, is a
// dead letter naming the field; the retry fields on a topic's stream are not read.
import { describe, expect, it } from 'vitest';
import { DELIVERY_COUNT_HEADER, KEY_HEADER, type Envelope } from 'oncemq';
import { outcomeFor, waitFor } from '../support/internal.js';
import { REDIS_SERVICE } from '../support/redis.js';
import { streamsEachTest, type ProxiedStreams } from '../support/redis-streams.js';
import { findService } from '../support/services.js';

const service = await findService(REDIS_SERVICE);

describe.skipIf(!service.available)('Redis Streams: oncemq fields from a foreign producer', () => {
  const { open, subscriptions } = streamsEachTest('node-redis', service.url);
  const topic = 'payments';
  const group = 'points';

  async function subscribeAcking(streams: ProxiedStreams): Promise<Envelope[]> {
    const seen: Envelope[] = [];
    subscriptions.push(
      await streams.transport.subscribe(group, [topic], (envelope) => {
        seen.push(envelope);
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      }),
    );
    return seen;
  }

  async function expectInvalid(streams: ProxiedStreams, field: string, value: string): Promise<void> {
    const letters = () => streams.transport.deadLetters.list({ group });
    await waitFor(async () => (await letters()).length > 0, `a dead letter for ${field}`, 5_000);
    const [letter] = await letters();
    expect(letter).toMatchObject({ reason: 'invalid-header', key: 'foreign' });
    expect(letter?.error).toContain(`'${field}' = ${JSON.stringify(value)}`);
  }

  it('dead-letters an entry whose oncemq-delivery-count is larger than any count oncemq writes', async () => {
    const streams = await open();
    const seen = await subscribeAcking(streams);
    await streams.admin.send(
      'XADD',
      streams.transport.settings.keys.topic(topic),
      '*',
      KEY_HEADER,
      'foreign',
      DELIVERY_COUNT_HEADER,
      '999999999',
      'body',
      '{}',
    );
    await expectInvalid(streams, DELIVERY_COUNT_HEADER, '999999999');
    expect(seen).toHaveLength(0);
  });

  it('reads a topic stream entry as of its stream, whatever its oncemq-topic field says', async () => {
    const streams = await open();
    const seen = await subscribeAcking(streams);
    await streams.admin.send(
      'XADD',
      streams.transport.settings.keys.topic(topic),
      '*',
      KEY_HEADER,
      'foreign',
      'oncemq-topic',
      'salaries',
      'body',
      '{}',
    );
    await waitFor(() => seen.length === 1, 'the delivery', 5_000);
    expect(seen[0]?.topic).toBe(topic);
  });

  it('dead-letters a retry stream entry naming a topic the group does not take', async () => {
    const streams = await open();
    const seen = await subscribeAcking(streams);
    await streams.admin.send(
      'XADD',
      streams.transport.settings.keys.retry(group),
      '*',
      KEY_HEADER,
      'foreign',
      'oncemq-topic',
      'salaries',
      'body',
      '{}',
    );
    await expectInvalid(streams, 'oncemq-topic', 'salaries');
    expect(seen).toHaveLength(0);
  });
});
