import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope, Outcome } from 'oncemq';
import { RocketMQTransport } from 'oncemq/rocketmq';
import { findRocketMQ } from '../support/brokers.js';
import { waitUntil } from '../support/local-points.js';
import { sleep } from '../support/points.js';
import { QUICK_ROCKETMQ } from '../support/rocketmq.js';

const broker = await findRocketMQ();

type State = 'COMMIT' | 'ROLLBACK' | 'UNKNOWN';

const ack = (envelope: Envelope, group: string): Outcome => ({
  kind: 'executed',
  action: 'ack',
  mode: 'transactional',
  attempt: 1,
  reclaimed: false,
  leaseLost: false,
  group,
  key: envelope.headers['oncemq-key'] ?? null,
  topic: envelope.topic,
  brokerId: envelope.brokerId,
  deliveryCount: envelope.deliveryCount,
  elapsedMs: 0,
});

/**
 * The broker here checks a half back 2 s after it was sent, then every 3 s (brokers/rocketmq/broker.conf:
 * transactionTimeOut, transactionCheckInterval), so an undecided half is decided within seconds.
 */
describe.skipIf(!broker.available)('RocketMQ transactional (half) messages with check-back', () => {
  const transports: RocketMQTransport[] = [];
  const id = (): string => randomUUID().slice(0, 8);

  afterEach(async () => {
    await Promise.all(transports.splice(0).map((transport) => transport.close()));
  });

  const open = (): RocketMQTransport => {
    const transport = new RocketMQTransport({ url: broker.url, ...QUICK_ROCKETMQ });
    transports.push(transport);
    return transport;
  };

  const consume = async (transport: RocketMQTransport, topic: string): Promise<string[]> => {
    const group = `g-${id()}`;
    const keys: string[] = [];
    await transport.subscribe(group, [topic], (envelope) => {
      keys.push(envelope.headers['oncemq-key'] ?? '');
      return Promise.resolve(ack(envelope, group));
    });
    return keys;
  };

  it('commits, rolls back, and decides an undecided half by its check-back, as the local transaction said', async () => {
    const transport = open();
    const topic = `orders-${id()}`;
    const decided = new Map<string, State>([
      ['committed', 'COMMIT'],
      ['rolled-back', 'ROLLBACK'],
      ['unknown-then-commit', 'COMMIT'],
      ['unknown-then-rollback', 'ROLLBACK'],
    ]);
    const checked: string[] = [];
    const producer = await transport.createTransactionProducer({
      group: `orders-producer-${id()}`,
      topics: [topic],
      check: (half) => {
        checked.push(half.key ?? '');
        return decided.get(half.key ?? '') ?? 'UNKNOWN';
      },
    });
    const keys = await consume(transport, topic);
    const results = [];
    for (const [key, state] of [
      ['committed', 'COMMIT'],
      ['rolled-back', 'ROLLBACK'],
      ['unknown-then-commit', 'UNKNOWN'],
      ['unknown-then-rollback', 'UNKNOWN'],
    ] as const) {
      results.push(
        await producer.sendInTransaction({ topic, key, body: { key } }, (half) => {
          expect(half).toMatchObject({ topic, key, checks: 0 });
          expect(typeof half.id).toBe('string');
          return state;
        }),
      );
    }
    expect(results.map((result) => result.state)).toEqual(['COMMIT', 'ROLLBACK', 'UNKNOWN', 'UNKNOWN']);
    expect(results[0]?.receipt?.brokerId).toBe(results[0]?.halfId);
    expect(results.slice(1).every((result) => result.receipt === undefined)).toBe(true);

    await waitUntil(() => keys.includes('committed'), 'the committed message', 15_000);
    await waitUntil(
      () => keys.includes('unknown-then-commit'),
      'the message committed by its check-back',
      30_000,
    );
    await waitUntil(
      () => checked.includes('unknown-then-rollback'),
      'the check-back that rolls back',
      30_000,
    );
    await sleep(4000); // one more check interval: a rolled-back half never shows
    expect(new Set(keys)).toEqual(new Set(['committed', 'unknown-then-commit']));
    // RocketMQ may check back a half its producer already ended (the end and the check race, measured
    // here for rolled-back and committed halves); answered COMMIT, a committed one is stored again:
    // at least once, as every hop — the consumers' ledger absorbs that copy by key.
    const copies = keys.filter((key) => key === 'committed').length;
    expect(copies).toBeLessThanOrEqual(1 + checked.filter((key) => key === 'committed').length);
  });

  it('a producer that crashes after its half message: another producer of the topic answers the check-back', async () => {
    const topic = `orders-${id()}`;
    const group = `orders-producer-${id()}`;
    const first = open();
    const crashed = await first.createTransactionProducer({ group, topics: [topic], check: () => 'UNKNOWN' });
    const sent = await crashed.sendInTransaction({ topic, key: 'orphan', body: { n: 1 } }, () => 'UNKNOWN');
    expect(sent.state).toBe('UNKNOWN');
    await first.close();

    const second = open();
    const asked: string[] = [];
    await second.createTransactionProducer({
      group,
      topics: [topic],
      check: (half) => {
        asked.push(half.id);
        return half.key === 'orphan' ? 'COMMIT' : 'UNKNOWN';
      },
    });
    const keys = await consume(second, topic);
    await waitUntil(() => keys.includes('orphan'), 'the orphan committed by the other producer', 45_000);
    expect(asked).toContain(sent.halfId);
  });

  it('refuses the local broker’s check timing, which RocketMQ’s broker decides', async () => {
    const transport = open();
    await expect(
      transport.createTransactionProducer({
        group: 'p',
        check: () => 'COMMIT',
        ...({ checkInterval: '1s' } as object),
      }),
    ).rejects.toThrow(/transactionCheckInterval/);
  });
});
