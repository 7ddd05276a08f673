import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, RetryPolicy, type Envelope, type Outcome } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { RocketMQTransport, type RocketMQTransportConfig } from 'oncemq/rocketmq';
import { findRocketMQ } from '../support/brokers.js';
import { ConnectProxy, routeGrpcThrough } from '../support/connect-proxy.js';
import { waitUntil } from '../support/local-points.js';
import { sleep } from '../support/points.js';
import { findPostgres, pointsSchema } from '../support/postgres.js';
import { keyOf, outcomeFor } from '../support/internal.js';
import { QUICK_ROCKETMQ } from '../support/rocketmq.js';

const broker = await findRocketMQ();
const postgres = await findPostgres();

interface Event {
  readonly eventId: string;
  readonly account: string;
  readonly seq: number;
}

describe.skipIf(!broker.available || !postgres.available)('RocketMQ pitfalls, against a real broker', () => {
  let world: Awaited<ReturnType<typeof pointsSchema>>;
  let proxy: ConnectProxy;
  let undoRoute: () => void;
  const transports: RocketMQTransport[] = [];
  const id = (): string => randomUUID().slice(0, 8);

  const open = (config: RocketMQTransportConfig = {}): RocketMQTransport => {
    const transport = new RocketMQTransport({ url: broker.url, ...QUICK_ROCKETMQ, ...config });
    transports.push(transport);
    return transport;
  };

  beforeEach(async () => {
    world = await pointsSchema(postgres.url, 4);
    await world.pool.query(
      `CREATE TABLE "${world.schema}".effects (n serial PRIMARY KEY, key text NOT NULL, account text NOT NULL, seq int NOT NULL)`,
    );
    proxy = await ConnectProxy.start();
    undoRoute = routeGrpcThrough(proxy);
  });

  afterEach(async () => {
    await Promise.all(transports.splice(0).map((transport) => transport.close()));
    undoRoute();
    await proxy.close();
    await world.close();
  });

  const pipelineFor = (group: string, fail: (event: Event, attempt: number) => boolean = () => false) => {
    const { pool, schema } = world;
    const ledger = new PostgresLedger({ pool, schema });
    const outcomes: Outcome[] = [];
    const pipeline = createPipeline<PgClientLike, Event>({
      ledger,
      group,
      key: { jsonPath: 'eventId' },
      retry: new RetryPolicy({ delays: ['1s', '1s', '1s'] }),
      onOutcome: (outcome) => outcomes.push(outcome),
      handler: async (event, ctx) => {
        await ctx.tx.query(`INSERT INTO "${schema}".effects (key, account, seq) VALUES ($1, $2, $3)`, [
          event.eventId,
          event.account,
          event.seq,
        ]);
        if (fail(event, ctx.attempt)) throw new Error(`${event.eventId} failed`);
      },
    });
    return { pipeline, outcomes, ledger };
  };

  const effects = async (): Promise<{ key: string; account: string; seq: number }[]> =>
    (
      await world.pool.query<{ key: string; account: string; seq: number }>(
        `SELECT key, account, seq FROM "${world.schema}".effects ORDER BY n`,
      )
    ).rows;

  it('an ack lost with its connection after the commit: the same copy comes back, counted by RocketMQ as a delivery, and the ledger absorbs it', async () => {
    const topic = `lost-ack-${id()}`;
    const group = `points-${id()}`;
    const transport = open();
    const { pipeline, outcomes, ledger } = pipelineFor(group);
    await ledger.init();
    let dropped = 0;
    const seen: Envelope[] = [];
    await transport.subscribe(
      group,
      [topic],
      {
        process: async (envelope) => {
          seen.push(envelope);
          const outcome = await pipeline.process(envelope);
          // The effect is committed; the connection goes before the ack reaches the broker.
          if (dropped === 0) dropped = proxy.drop();
          return outcome;
        },
      },
      { visibility: '2s' },
    );
    const receipt = await transport.publish({
      topic,
      key: 'e-1',
      body: { eventId: 'e-1', account: 'a', seq: 0 },
    });
    await waitUntil(() => seen.length >= 2, 'the copy again', 30_000);
    expect(dropped).toBeGreaterThan(0);
    expect(seen[1]).toMatchObject({ brokerId: receipt.brokerId, deliveryCount: 2, brokerDeliveryCount: 2 });
    await waitUntil(() => outcomes.length >= 2, 'the second outcome', 10_000);
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['executed', 'duplicate']);
    expect(outcomes[1]).toMatchObject({ source: 'redelivery' });
    expect((await effects()).map((row) => row.key)).toEqual(['e-1']);
  });

  it('recovers from dropped connections while messages flow, losing none and applying each once', async () => {
    const topic = `flow-${id()}`;
    const group = `points-${id()}`;
    const transport = open();
    const { pipeline, ledger } = pipelineFor(group);
    await ledger.init();
    await transport.subscribe(group, [topic], pipeline, { concurrency: 4, visibility: '2s' });
    const keys: string[] = [];
    for (let i = 0; i < 60; i++) {
      const eventId = `e-${i}`;
      await transport.publish({ topic, key: eventId, body: { eventId, account: 'a', seq: i } });
      keys.push(eventId);
      if (i === 20 || i === 40) proxy.drop();
    }
    proxy.drop();
    await waitUntil(async () => (await effects()).length >= keys.length, 'every message applied', 60_000);
    await sleep(3000); // past the visibility: a copy whose ack was cut has come back by now
    const applied = (await effects()).map((row) => row.key);
    expect([...applied].sort()).toEqual([...keys].sort());
  });

  it('FIFO: a failing message holds its key’s later messages back and they run in publish order; other keys go on', async () => {
    const topic = `fifo-${id()}`;
    const group = `points-${id()}`;
    const transport = open({ fifo: true });
    const { pipeline, ledger } = pipelineFor(
      group,
      (event, attempt) => event.eventId === 'a-2' && attempt < 3,
    );
    await ledger.init();
    await transport.subscribe(group, [topic], pipeline, { ordering: {}, concurrency: 4, visibility: '5s' });
    for (let seq = 0; seq < 5; seq++) {
      for (const account of ['a', 'b']) {
        const eventId = `${account}-${seq}`;
        await transport.publish({
          topic,
          key: eventId,
          orderingKey: account,
          body: { eventId, account, seq },
        });
      }
    }
    await waitUntil(async () => (await effects()).length === 10, 'every message applied', 60_000);
    const rows = await effects();
    for (const account of ['a', 'b']) {
      expect(rows.filter((row) => row.account === account).map((row) => row.seq)).toEqual([0, 1, 2, 3, 4]);
    }
    // b went on while a-2 waited for its retries.
    const order = rows.map((row) => row.key);
    expect(order.indexOf('b-4')).toBeLessThan(order.indexOf('a-2'));
  });

  it('FIFO, unordered: a retry runs again in place, so what was acked or dead-lettered after it in its queue is never handed out again', async () => {
    // One queue: every message is popped from it, behind the one that fails. An orderly group keeps its
    // invisibility per queue; a retry made visible again at the broker brought back the messages received
    // after it, acked ones included (a dead letter stored twice).
    const topic = `fifo-${id()}`;
    const group = `plain-${id()}`;
    const transport = open({ fifo: true, queues: 1 });
    const seen: string[] = [];
    await transport.publish({ topic, key: 'first-retry', body: {} });
    for (let n = 0; n < 3; n++) {
      await transport.publish({ topic, key: `dead-${n}`, body: {} });
      await transport.publish({ topic, key: `ack-${n}`, body: {} });
    }
    await transport.subscribe(
      group,
      [topic],
      {
        process: (envelope: Envelope) => {
          const key = keyOf(envelope) ?? '';
          seen.push(`${key}@${envelope.deliveryCount}`);
          if (key === 'first-retry') {
            return Promise.resolve(outcomeFor(envelope, envelope.deliveryCount < 2 ? 'retry' : 'ack', 1000));
          }
          return Promise.resolve(outcomeFor(envelope, key.startsWith('dead') ? 'dead-letter' : 'ack', 0));
        },
      },
      { visibility: '5s', concurrency: 8 },
    );
    await waitUntil(() => seen.includes('first-retry@2'), 'the retry, run again', 60_000);
    // Long enough for the broker to hand the queue out again after the retry's second (5 s visibility).
    await sleep(7000);
    expect([...seen].sort()).toEqual(
      [
        'first-retry@1',
        'first-retry@2',
        'dead-0@1',
        'dead-1@1',
        'dead-2@1',
        'ack-0@1',
        'ack-1@1',
        'ack-2@1',
      ].sort(),
    );
    const letters = await transport.deadLetters.list({ group });
    expect(letters.map((letter) => letter.key).sort()).toEqual(['dead-0', 'dead-1', 'dead-2']);
  });
});
