import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Envelope } from 'oncemq';
import type { LocalBroker } from 'oncemq/local';
import { payment, scratchDir } from '../support/points.js';
import { ackOutcome, PointsApp, publishPayments, testBroker, waitUntil } from '../support/local-points.js';

describe('local broker: publish, consume, ack, offsets', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let broker: LocalBroker;

  beforeEach(() => {
    scratch = scratchDir();
    broker = testBroker(scratch.dir);
  });

  afterEach(async () => {
    await broker.close();
    scratch.remove();
  });

  it('confirms a publish with a host:port broker id and delivers it with count, publish time and key', async () => {
    const before = Date.now();
    const [receipt] = await publishPayments(broker, 1);
    expect(receipt?.brokerId).toMatch(/^127\.0\.0\.1:10911-[0-9A-F]{16}$/);
    const seen: Envelope[] = [];
    await broker.subscribe('g', ['payments'], (envelope) => {
      seen.push(envelope);
      return Promise.resolve(ackOutcome(envelope));
    });
    await waitUntil(() => seen.length === 1, 'the delivery');
    const envelope = seen[0] as Envelope;
    expect(envelope.brokerId).toBe(receipt?.brokerId);
    expect(envelope.deliveryCount).toBe(1);
    expect(envelope.publishedAt?.getTime()).toBeGreaterThanOrEqual(before);
    expect(envelope.headers['oncemq-key']).toBe('evt-0');
    expect(envelope.headers['oncemq-unique-id']).toBe(receipt?.messageId);
  });

  it('spreads messages round robin over 4 queues, and keeps one ordering key in one queue', async () => {
    const receipts = await publishPayments(broker, 8);
    expect(receipts.map((receipt) => receipt.position?.queue)).toEqual([0, 1, 2, 3, 0, 1, 2, 3]);
    const ordered = [];
    for (let i = 0; i < 6; i++) {
      ordered.push(
        await broker.publish({ topic: 'payments', key: `k${i}`, orderingKey: 'order-7', body: {} }),
      );
    }
    expect(new Set(ordered.map((receipt) => receipt.position?.queue)).size).toBe(1);
  });

  it('resumes a group after its committed offsets: a new member gets only what was not processed', async () => {
    await publishPayments(broker, 10);
    const first: string[] = [];
    const one = await broker.subscribe('g', ['payments'], (envelope) => {
      first.push(envelope.brokerId);
      return Promise.resolve(ackOutcome(envelope));
    });
    await waitUntil(() => first.length === 10, 'ten deliveries');
    await one.close();
    const fresh = await publishPayments(broker, 5, 'payments', 10);
    const second: string[] = [];
    const two = await broker.subscribe('g', ['payments'], (envelope) => {
      second.push(envelope.brokerId);
      return Promise.resolve(ackOutcome(envelope));
    });
    await waitUntil(() => second.length === 5, 'five deliveries');
    expect(new Set(second)).toEqual(new Set(fresh.map((receipt) => receipt.brokerId)));
    expect(await broker.lag('g', ['payments'])).toBe(5);
    two.commit();
    expect(await broker.lag('g', ['payments'])).toBe(0);
  });

  it('never acks before the outcome: a processor that throws gets the same copy again', async () => {
    const [receipt] = await publishPayments(broker, 1);
    const seen: string[] = [];
    await broker.subscribe('g', ['payments'], (envelope) => {
      seen.push(envelope.brokerId);
      if (seen.length === 1) return Promise.reject(new Error('processor down'));
      return Promise.resolve(ackOutcome(envelope));
    });
    await waitUntil(() => seen.length === 2, 'the second delivery');
    expect(seen).toEqual([receipt?.brokerId, receipt?.brokerId]);
  });

  it('rebalances when a member stops heart-beating: its queues go to the live members', async () => {
    broker = testBroker(scratch.dir, { path: `${scratch.dir}/heartbeat.db`, sessionTimeout: '300ms' });
    const subscription = await broker.subscribe(
      'g',
      ['payments'],
      (envelope) => Promise.resolve(ackOutcome(envelope)),
      {
        consumerName: 'a',
      },
    );
    broker.store.heartbeat('g', 'z-silent-member');
    await waitUntil(() => subscription.assignment.length === 3, 'sharing with the silent member');
    await waitUntil(() => subscription.assignment.length === 5, 'taking over the silent member’s queues');
    expect(broker.store.liveMembers('g', 300)).toEqual([subscription.memberId]);
  });

  it('hands a whole pulled batch to processBatch when the processor offers it', async () => {
    broker = testBroker(scratch.dir, { path: `${scratch.dir}/batch.db`, queues: 1, pullBatchSize: 8 });
    await publishPayments(broker, 20);
    const batches: number[] = [];
    await broker.subscribe('g', ['payments'], {
      process: () => Promise.reject(new Error('process must not be called')),
      processBatch: (envelopes) => {
        batches.push(envelopes.length);
        return Promise.resolve(envelopes.map((envelope) => ackOutcome(envelope)));
      },
    });
    await waitUntil(() => batches.reduce((sum, n) => sum + n, 0) === 20, 'every message in batches');
    expect(batches).toEqual([8, 8, 4]);
  });

  it('a rebalance mid-batch replays only the uncommitted range, and each effect happens once', async () => {
    broker = testBroker(scratch.dir, { queues: 1, pullBatchSize: 4, path: `${scratch.dir}/rebalance.db` });
    const app = new PointsApp(scratch.dir);
    const receipts = await publishPayments(broker, 12);
    const pipeline = app.pipeline();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const byA: string[] = [];
    const a = await broker.subscribe(
      'points',
      ['payments'],
      {
        process: async (envelope) => {
          const index = receipts.findIndex((receipt) => receipt.brokerId === envelope.brokerId);
          if (index === 6 && byA.length === 6) a.commit(); // persists offset 6: messages 0..5 are done
          if (index === 9 && !byA.includes(envelope.brokerId)) await gate; // mid-batch (8..11)
          byA.push(envelope.brokerId);
          return pipeline.process(envelope);
        },
      },
      { consumerName: 'a' },
    );
    await waitUntil(() => byA.length === 9, 'A at message 9');
    const byB: string[] = [];
    const b = await broker.subscribe(
      'points',
      ['payments'],
      (envelope) => {
        byB.push(envelope.brokerId);
        return pipeline.process(envelope);
      },
      { consumerName: 'b' },
    );
    await waitUntil(() => byB.length === 6, 'B replaying the uncommitted range');
    release();
    await waitUntil(async () => {
      a.commit();
      b.commit();
      return (await broker.lag('points', ['payments'])) === 0 && byA.length === 12;
    }, 'drain');
    expect(byB).toEqual(receipts.slice(6).map((receipt) => receipt.brokerId));
    const effects = app.effects();
    expect([...effects.values()].every((count) => count === 1)).toBe(true);
    expect(effects.size).toBe(12);
    const sources = app.outcomes.flatMap((o) => (o.kind === 'duplicate' ? [o.source] : []));
    expect(sources.length).toBeGreaterThanOrEqual(3);
    expect(new Set(sources)).toEqual(new Set(['redelivery']));
    await app.close();
  });

  it('dead-letters poison with its reason and error; a replay delivers it again under a new broker id', async () => {
    const app = new PointsApp(scratch.dir);
    await broker.publish({ topic: 'payments', key: 'poison-1', body: '{"eventId": ' });
    await broker.subscribe('points', ['payments'], app.pipeline());
    await waitUntil(
      async () => (await broker.deadLetters.list({ group: 'points' })).length === 1,
      'the dead letter',
    );
    const [dead] = await broker.deadLetters.list({ group: 'points' });
    expect(dead).toMatchObject({ key: 'poison-1', reason: 'malformed', topic: 'payments', deliveryCount: 1 });
    expect(dead?.details).toMatchObject({ replayedAt: null });
    expect(dead?.error).toMatch(/cannot decode the body/);
    expect(await broker.deadLetters.replay('points', [dead?.id ?? ''])).toBe(1);
    const [replayed] = await broker.deadLetters.list({ group: 'points', includeReplayed: true });
    const replayBrokerId = replayed?.details?.['replayBrokerId'];
    expect(replayBrokerId).not.toBe(dead?.brokerId);
    await waitUntil(() => app.deliveries.some((e) => e.brokerId === replayBrokerId), 'the replayed copy');
    expect(app.deliveries.at(-1)).toMatchObject({ topic: 'payments', deliveryCount: 1 });
    await waitUntil(
      async () => (await broker.deadLetters.list({ group: 'points' })).length === 1,
      'the second dead letter',
    );
    expect(await broker.deadLetters.replay('points', [dead?.id ?? ''])).toBe(0);
    expect(await broker.deadLetters.replay('inventory', [dead?.id ?? ''])).toBe(0);
    expect((await broker.deadLetters.list({ group: 'points', includeReplayed: true })).length).toBe(2);
    await app.close();
  });

  it('retries a failing message through the retry topic, dead-letters it past the policy, and a replay applies it once', async () => {
    const app = new PointsApp(scratch.dir);
    let healthy = false;
    const event = payment(1);
    await broker.publish({ topic: 'payments', key: event.eventId, body: event });
    await broker.subscribe(
      'points',
      ['payments'],
      app.pipeline({
        onHandler: () => {
          if (!healthy) throw new Error('points service down');
        },
      }),
    );
    await waitUntil(
      async () => (await broker.deadLetters.list({ group: 'points' })).length === 1,
      'the dead letter',
    );
    expect(app.deliveries.map((e) => e.deliveryCount)).toEqual([1, 2, 3, 4]);
    expect(new Set(app.deliveries.map((e) => e.topic))).toEqual(new Set(['payments']));
    const [dead] = await broker.deadLetters.list({ group: 'points' });
    expect(dead).toMatchObject({ reason: 'retries-exhausted', deliveryCount: 4 });
    expect(dead?.error).toMatch(/points service down/);
    expect(app.effects().size).toBe(0);
    healthy = true;
    await broker.deadLetters.replay('points', [dead?.id ?? '']);
    await waitUntil(() => app.effects().get(event.eventId) === 1, 'the replayed effect');
    expect(app.outcomes.at(-1)).toMatchObject({ kind: 'executed', reclaimed: true });
    await app.close();
  });
});
