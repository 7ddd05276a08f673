import { describe, expect, it } from 'vitest';
import { ConfigError, TransportUnavailableError, type Envelope, type Outcome } from 'oncemq';
import { NatsTransport, type NatsTransportConfig } from 'oncemq/nats';
import { outcomeFor } from '../support/internal.js';
import { waitUntil } from '../support/local-points.js';
import {
  directConnection,
  NATS_SERVICE,
  natsTestBed,
  QUICK_NATS,
  type NatsUnderTest,
} from '../support/nats.js';
import { sleep } from '../support/points.js';
import { findService } from '../support/services.js';

const service = await findService(NATS_SERVICE);

const ack = (seen: Envelope[]) => (envelope: Envelope) => {
  seen.push(envelope);
  return Promise.resolve<Outcome>(outcomeFor(envelope, 'ack', 0));
};

describe.skipIf(!service.available)('NATS topology, connection and publishing', () => {
  const bed = natsTestBed(service.url);
  const open = (config: NatsTransportConfig = {}): Promise<NatsUnderTest> => bed.open(config);
  /** Another transport on the same namespace, straight to the server. */
  const sibling = (test: NatsUnderTest, config: NatsTransportConfig): NatsTransport => {
    return bed.track(
      new NatsTransport({
        ...QUICK_NATS,
        servers: service.url,
        streamPrefix: test.streamPrefix,
        subjectPrefix: test.subjectPrefix,
        ...config,
      }),
    );
  };
  const streamNames = async (prefix: string): Promise<string[]> => {
    const names: string[] = [];
    for await (const name of bed.admin.streams.names()) if (name.startsWith(prefix)) names.push(name);
    return names.sort();
  };

  it("creates nothing with topology 'check': a missing stream or consumer is a ConfigError naming it", async () => {
    const test = await open();
    const check = sibling(test, { topology: 'check' });
    await expect(check.publish({ topic: 'orders', key: 'k', body: {} })).rejects.toThrow(
      new RegExp(`stream ${test.streamPrefix}_orders does not exist`),
    );
    await expect(check.subscribe('g', ['orders'], ack([]))).rejects.toBeInstanceOf(ConfigError);
    await expect(check.deadLetters.list({ group: 'g' })).rejects.toThrow(/stream .*-DLQ does not exist/);
    expect(await streamNames(test.streamPrefix)).toEqual([]);

    await (await test.transport.subscribe('g', ['orders'], ack([]))).close();
    expect(await streamNames(test.streamPrefix)).toEqual([
      `${test.streamPrefix}-DLQ`,
      `${test.streamPrefix}-RETRY`,
      `${test.streamPrefix}_orders`,
    ]);
    await expect(check.subscribe('other', ['orders'], ack([]))).rejects.toThrow(
      /consumer other on stream .* does not exist/,
    );
    const seen: Envelope[] = [];
    await check.subscribe('g', ['orders'], ack(seen));
    await check.publish({ topic: 'orders', key: 'k', body: {} });
    await waitUntil(() => seen.length > 0, 'a delivery through the checked topology');
  });

  it('refuses a second application with a stream prefix of its own but the same subject prefix: a ConfigError on subjectPrefix', async () => {
    const test = await open();
    await test.transport.publish({ topic: 'orders', key: 'k', body: {} });
    const other = sibling(test, { streamPrefix: `${test.streamPrefix}X` });
    const refused = await other
      .publish({ topic: 'orders', key: 'k', body: {} })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).field).toBe('subjectPrefix');
    expect(await streamNames(`${test.streamPrefix}X`)).toEqual([]);
  });

  it('subscribes one group to several topics on a 2.9 server: one durable consumer per topic stream (#7)', async () => {
    const test = await open();
    const seen: Envelope[] = [];
    await test.transport.subscribe('g', ['orders', 'refunds'], ack(seen));
    await test.transport.publish({ topic: 'orders', key: 'o-1', body: {} });
    await test.transport.publish({ topic: 'refunds', key: 'r-1', body: {} });
    await waitUntil(() => seen.length === 2, 'both topics');
    expect(seen.map((envelope) => envelope.topic).sort()).toEqual(['orders', 'refunds']);
  });

  it('makes a durable consumer deleted under a running subscription again, and consumption resumes (#6)', async () => {
    // Long pulls: the server's word that the consumer is gone ends them at once, not missed heartbeats.
    const test = await open({ pullExpires: '10s' });
    const seen: Envelope[] = [];
    await test.transport.subscribe('g', ['orders'], ack(seen));
    await test.transport.publish({ topic: 'orders', key: 'before', body: {} });
    await waitUntil(() => seen.length === 1, 'the first delivery');
    await bed.admin.consumers.delete(`${test.streamPrefix}_orders`, 'g');
    await test.transport.publish({ topic: 'orders', key: 'after', body: {} });
    await waitUntil(
      () => seen.some((envelope) => envelope.headers['oncemq-key'] === 'after'),
      'consumption again',
      5000,
    );
  });

  it('finds out from missed heartbeats that nothing answers its pulls (the consumer gone, made again elsewhere), and pulls again (#6)', async () => {
    const test = await open();
    await (await test.transport.subscribe('g', ['orders'], ack([]))).close();
    const check = sibling(test, { topology: 'check' });
    const seen: Envelope[] = [];
    await check.subscribe('g', ['orders'], ack(seen));
    await bed.admin.consumers.delete(`${test.streamPrefix}_orders`, 'g');
    // The member cannot make it again ('check'): its pulls go to a consumer that is not there.
    await sleep(1500);
    await (await test.transport.subscribe('g', ['orders'], ack([]))).close();
    await test.transport.publish({ topic: 'orders', key: 'after', body: {} });
    await waitUntil(() => seen.length === 1, 'consumption again');
  });

  it('waits through an outage to publish: the message is stored once, under the same Nats-Msg-Id', async () => {
    const test = await open({ requestTimeout: '500ms' });
    await test.transport.publish({ topic: 'orders', key: 'warm-up', body: {} });
    const outage = test.proxy.outage(1500);
    await waitUntil(() => test.transport.connectionLosses > 0, 'the outage seen');
    const receipt = await test.transport.publish({ topic: 'orders', key: 'during', body: {} });
    await outage;
    expect(receipt.duplicate).toBe(false);
    expect((await bed.admin.streams.info(`${test.streamPrefix}_orders`)).state.messages).toBe(2);
  });

  it('rejects a publish it cannot get confirmed within publishTimeout with TransportUnavailableError', async () => {
    const test = await open({ requestTimeout: '300ms', publishTimeout: '1s' });
    await test.transport.publish({ topic: 'orders', key: 'warm-up', body: {} });
    const outage = test.proxy.outage(3000);
    await waitUntil(() => test.transport.connectionLosses > 0, 'the outage seen');
    await expect(test.transport.publish({ topic: 'orders', key: 'lost', body: {} })).rejects.toBeInstanceOf(
      TransportUnavailableError,
    );
    await outage;
  });

  it('works on the connection it is given and leaves it open when it closes', async () => {
    const test = await open();
    const connection = await directConnection(service.url);
    try {
      const mine = new NatsTransport({
        ...QUICK_NATS,
        connection,
        streamPrefix: test.streamPrefix,
        subjectPrefix: test.subjectPrefix,
      });
      const seen: Envelope[] = [];
      await mine.subscribe('g', ['orders'], ack(seen));
      await mine.publish({ topic: 'orders', key: 'k', body: {} });
      await waitUntil(() => seen.length === 1, 'the delivery');
      await mine.close();
      expect(connection.isClosed()).toBe(false);
      await connection.flush();
    } finally {
      await connection.close();
    }
  });

  it('refuses topics a stream name cannot carry, and a batch larger than the concurrency', async () => {
    const test = await open();
    await expect(test.transport.publish({ topic: 'a.b', key: 'k', body: {} })).rejects.toBeInstanceOf(
      ConfigError,
    );
    await expect(
      test.transport.subscribe(
        'g',
        ['orders'],
        { process: ack([]), processBatch: () => Promise.resolve([]) },
        { concurrency: 4, batchSize: 8 },
      ),
    ).rejects.toThrow(/batchSize/);
    expect(() => new NatsTransport({ maxDeliver: 1 })).toThrow(/maxDeliver/);
  });
});
