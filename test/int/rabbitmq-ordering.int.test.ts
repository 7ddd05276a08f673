// Per-key ordered consumption over RabbitMQ: an ordered group's partition queues with a single
// active consumer each, several members (transports of their own, as separate processes would
// have), connections dropped and a member closed mid-run.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RabbitTransport } from 'oncemq/rabbitmq';
import { outcomeFor, unique, waitFor } from '../../src/testing/transport-conformance-fixture.js';
import { runOrderedScenario } from '../support/ordered-orders.js';
import { findPostgres } from '../support/postgres.js';
import { findRabbit, rabbitWorld, type RabbitWorld } from '../support/rabbitmq.js';

const rabbit = await findRabbit();
const postgres = await findPostgres();

describe.skipIf(!rabbit.available || !postgres.available)('per-key ordered consumption over RabbitMQ', () => {
  let world: RabbitWorld;

  beforeEach(async () => {
    world = await rabbitWorld(rabbit.url, { retention: false, partitions: 4 });
  });

  afterEach(async () => {
    await world.cleanup();
  });

  it('applies create → pay → ship in order for every order, once, across members, drops and a poison', async () => {
    const topic = unique('orders');
    const group = unique('fulfilment');
    const members: RabbitTransport[] = [];
    const result = await runOrderedScenario(
      {
        topic,
        group,
        publish: (message) => world.transport.publish(message),
        subscribe: (member, pipeline) => {
          members[member] ??= world.open();
          return members[member].subscribe(group, [topic], pipeline, {
            ordering: {},
            concurrency: 8,
            consumerName: `member-${member}`,
          });
        },
        dropConnections: () => {
          world.proxy.dropConnections();
        },
        deadLetters: () => world.transport.deadLetters.list({ group }),
      },
      { postgresUrl: postgres.url, orders: 600 },
    );
    expect(result.effects).toBe(1799);
    const declared = new Set(members.flatMap((member) => [...member.declared.queues]));
    expect([...declared].filter((queue) => /@p\d+$/.test(queue))).toHaveLength(4);
  }, 180_000);

  it('replays a dead letter of an ordered group onto its partition queue', async () => {
    const topic = unique('orders');
    const group = unique('fulfilment');
    const seen: string[] = [];
    const subscription = await world.transport.subscribe(
      group,
      [topic],
      (envelope) => {
        seen.push(envelope.brokerId);
        return Promise.resolve(outcomeFor(envelope, 'dead-letter', 0));
      },
      { ordering: {} },
    );
    await world.transport.publish({ topic, key: 'order-1-pay', orderingKey: 'order-1', body: {} });
    await waitFor(
      async () => (await world.transport.deadLetters.list({ group })).length === 1,
      'the dead letter',
      10_000,
    );
    const [letter] = await world.transport.deadLetters.list({ group });
    expect(letter?.details?.originalQueue).toMatch(/@p\d$/);
    expect(await world.transport.deadLetters.replay(group, [letter?.id ?? ''])).toBe(1);
    await waitFor(() => seen.length === 2, 'the replayed copy processed', 10_000);
    await subscription.close();
  });

  it('refuses a member configured with another partition count', async () => {
    const topic = unique('orders');
    const group = unique('fulfilment');
    const first = await world.transport.subscribe(group, [topic], () => Promise.reject(new Error('unused')), {
      ordering: {},
    });
    await first.close();
    const other = world.open({ partitions: 8 });
    await expect(
      other.subscribe(group, [topic], () => Promise.reject(new Error('unused')), { ordering: {} }),
    ).rejects.toThrow(/ordered over 4 partitions .* configured with 8/);
  });
});
