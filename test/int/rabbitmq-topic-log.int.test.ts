// The RabbitMQ topic log: what it costs, how it is turned off, and where a new group starts without it.
import amqplib from 'amqplib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KEY_HEADER, type Envelope } from 'oncemq';
import { outcomeFor, sleep, waitFor } from '../support/internal.js';
import { findRabbit, rabbitWorld, type RabbitWorld } from '../support/rabbitmq.js';

const service = await findRabbit();

const keyOf = (envelope: Envelope): string => envelope.headers[KEY_HEADER] ?? '';

/** Messages in a queue (a stream counts what it holds), on a direct connection; `undefined` when there is no such queue. */
async function depth(queue: string): Promise<number | undefined> {
  const connection = await amqplib.connect(service.url);
  try {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    return (await channel.checkQueue(queue)).messageCount;
  } catch {
    return undefined;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

describe.skipIf(!service.available)('RabbitMQ topic log', () => {
  let world: RabbitWorld;
  const topic = 'payments';

  beforeEach(async () => {
    world = await rabbitWorld(service.url);
  });

  afterEach(async () => {
    await world.cleanup();
  });

  const collect = (seen: string[]) => (envelope: Envelope) =>
    Promise.resolve((seen.push(keyOf(envelope)), outcomeFor(envelope, 'ack', 0)));

  it('stores every publish a second time in the topic’s log (a stream per topic), beside the group queues', async () => {
    const seen: string[] = [];
    await world.transport.subscribe('points', [topic], collect(seen), { from: 'now' });
    for (const key of ['a', 'b', 'c']) await world.transport.publish({ topic, key, body: {} });
    await waitFor(() => seen.length === 3, 'the three messages', 15_000);
    // The group's queue had them (and acked them); the log keeps all three for groups to come.
    await waitFor(
      async () => (await depth(`${world.prefix}@log.${topic}`)) === 3,
      'three in the log',
      15_000,
    );
  });

  it('with retention: false keeps no log: a new group starts now, and asking for the earliest is refused', async () => {
    const bare = world.open({ retention: false });
    const first: string[] = [];
    await bare.subscribe('first', [topic], collect(first));
    // Only the first group's queue gets this one: nothing keeps it for a group that does not exist yet.
    await bare.publish({ topic, key: 'before', body: {} });
    const second: string[] = [];
    await bare.subscribe('second', [topic], collect(second));
    await bare.publish({ topic, key: 'after', body: {} });
    await waitFor(() => second.includes('after') && first.includes('after'), 'the later message', 15_000);
    await sleep(300);
    expect(second).toEqual(['after']);
    expect(first).toEqual(['before', 'after']);
    expect(await depth(`${world.prefix}@log.${topic}`)).toBeUndefined();
    await expect(bare.subscribe('third', [topic], collect([]), { from: 'earliest' })).rejects.toThrow(
      /^from: this RabbitMQ transport keeps no topic logs \(retention: false\)/,
    );
  });
});
