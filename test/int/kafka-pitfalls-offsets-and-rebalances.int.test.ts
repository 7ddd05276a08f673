// Kafka pitfalls of offsets: never committed past a record in flight, a retried record that holds back
// none after it, rebalances, a member returning from a lost session, and a commit lost with its connection.
import { subscribe as listen, unsubscribe as stopListening } from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { createPipeline, RetryPolicy, type Envelope, type Outcome, type PublishReceipt } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { KafkaTransport } from 'oncemq/kafka';
import { kafkaAdmin, proxiedKafka, type ProxiedKafka } from '../support/kafka.js';
import { gate, kafka, kafkaPitfallScope, retryOutcome } from '../support/kafka-pitfalls.js';
import { ackOutcome, waitUntil } from '../support/local-points.js';
import { sleep } from '../support/points.js';
import { findPostgres, pointsSchema } from '../support/postgres.js';

const postgres = await findPostgres();

describe.skipIf(!kafka.available)('Kafka pitfalls', () => {
  let proxied: ProxiedKafka;
  let topic: string;
  let group: string;
  const { subscriptions, committed, publishToOnePartition, commitStarts } = kafkaPitfallScope((place) => {
    ({ proxied, topic, group } = place);
  });

  it('never commits an offset past a record still in flight, whatever finishes after it', async () => {
    const { transport } = proxied;
    // One partition; the first record is slow, the five after it finish at once.
    const { receipts, partition, first } = await publishToOnePartition(6);
    const slow = gate();
    const done = new Set<string>();
    subscriptions.push(
      await transport.subscribe(
        group,
        [topic],
        async (envelope) => {
          if (envelope.brokerId === receipts[0]?.brokerId) await slow.opened;
          done.add(envelope.brokerId);
          return ackOutcome(envelope);
        },
        { concurrency: 6 },
      ),
    );
    await waitUntil(() => done.size === 5, 'the five records after the slow one');
    await sleep(500);
    // Five later records are finished; the committed offset still points at the slow one (or is unset).
    expect(await committed(partition)).toBeLessThanOrEqual(first);
    slow.open();
    await waitUntil(async () => (await committed(partition)) === first + 6n, 'the whole prefix committed');
  });

  it('a retried record waits in its retry tier without holding back the records after it in the partition', async () => {
    const { transport } = proxied;
    const poison = await transport.publish({ topic, key: 'poison', orderingKey: 'one', body: {} });
    for (let i = 0; i < 10; i++)
      await transport.publish({ topic, key: `after-${i}`, orderingKey: 'one', body: {} });
    const order: string[] = [];
    subscriptions.push(
      await transport.subscribe(group, [topic], (envelope) => {
        const key = envelope.headers['oncemq-key'] ?? '';
        order.push(`${key}#${envelope.deliveryCount}`);
        return Promise.resolve(
          key === 'poison' && envelope.deliveryCount === 1
            ? retryOutcome(envelope, 1500)
            : ackOutcome(envelope),
        );
      }),
    );
    await waitUntil(() => order.includes('poison#2'), 'the retried poison', 30_000);
    // Every later record of the partition ran before the retry came back.
    expect(order.indexOf('poison#2')).toBe(order.length - 1);
    expect(order.filter((entry) => entry.startsWith('after-'))).toHaveLength(10);
    expect(order[0]).toBe('poison#1');
    // The original's offset is committed once the retry copy is confirmed in its tier.
    await waitUntil(
      async () =>
        (await committed(Number(poison.position?.partition))) >= BigInt(poison.position?.offset ?? 0) + 11n,
      'the partition committed past the retried record',
    );
  });

  it('a rebalance while a record is in flight loses nothing and commits every record (the new owner may run it again)', async () => {
    const { transport } = proxied;
    const receipts: PublishReceipt[] = [];
    for (let i = 0; i < 3; i++)
      receipts.push(await transport.publish({ topic, key: `r-${i}`, orderingKey: 'one', body: {} }));
    const partition = Number(receipts[0]?.position?.partition);
    const slow = gate();
    const seen: string[] = [];
    const processor = async (envelope: Envelope): Promise<Outcome> => {
      seen.push(envelope.brokerId);
      if (seen.length === 1) await slow.opened;
      return ackOutcome(envelope);
    };
    subscriptions.push(await transport.subscribe(group, [topic], processor, { concurrency: 1 }));
    await waitUntil(() => seen.length === 1, 'the slow record');
    // A second member joins while the first record is in flight: the group rebalances.
    subscriptions.push(await transport.subscribe(group, [topic], processor, { concurrency: 1 }));
    await sleep(500);
    slow.open();
    await waitUntil(
      async () => (await committed(partition)) === BigInt(receipts[2]?.position?.offset ?? 0) + 1n,
      'all three committed',
      60_000, // a rebalance of a loaded broker can take longer than the default wait
    );
    // Nothing lost, and the group's offset never moves back: the old owner does not commit a partition
    // that went (the new owner may have committed past it). The client cannot hold a rebalance until the
    // record in flight is finished, so the new owner may run it again (docs/transports/kafka.md): a copy
    // the ledger absorbs.
    expect(new Set(seen)).toEqual(new Set(receipts.map((receipt) => receipt.brokerId)));
  }, 90_000);

  // Its set-up races the client (the held commit must start inside the stall; "A starts a commit" gave up
  // once in three CI runs): a set-up that missed gets two more tries, while a commit that moves the
  // offset back fails every try (it did, in each run on the code before the fix).
  it(
    'a member whose session ran out with a commit held on the wire does not move the group’s offset back when it returns and closes',
    { retry: 2, timeout: 240_000 },
    async () => {
      // A (through a proxy) is paused as by SIGSTOP: its connections hang, shorter than its request timeout,
      // longer than its session. B takes the partition over and commits past A's last finished record.
      const a = await proxiedKafka(kafka.bootstrap, { partitions: 1, sessionTimeout: '6s', timeout: '40s' });
      const b = new KafkaTransport({
        brokers: [kafka.bootstrap],
        prefix: a.prefix,
        partitions: 1,
        failureBackoff: '200ms',
      });
      const admin = kafkaAdmin(kafka.bootstrap);
      const commits = commitStarts();
      const answered = { count: 0 };
      const onAnswer = (context: unknown): void => {
        if ((context as { client?: { groupId?: string } }).client?.groupId === group) answered.count++;
      };
      listen('tracing:plt:kafka:consumer:commits:asyncEnd', onAnswer);
      try {
        const publish = async (count: number, phase: string): Promise<PublishReceipt[]> => {
          const receipts: PublishReceipt[] = [];
          for (let i = 0; i < count; i++)
            receipts.push(await b.publish({ topic, key: `${phase}-${i}`, body: { phase } }));
          return receipts;
        };
        const [firstReceipt] = await publish(5, 'done');
        const first = BigInt(firstReceipt?.position?.offset ?? -1);
        const held = gate();
        let seenByA = 0;
        const memberA = await a.transport.subscribe(group, [topic], async (envelope: Envelope) => {
          seenByA++;
          if ((envelope.body as { phase?: string }).phase === 'held') await held.opened;
          return ackOutcome(envelope);
        });
        await waitUntil(async () => (await committed(0)) === first + 5n, 'A commits the first five', 45_000);
        await publish(5, 'held');
        await waitUntil(() => seenByA === 10, 'A holds five records in flight', 45_000);
        // The broker may show a commit before A has its answer: the answer must not be held in the proxy.
        await waitUntil(
          () => answered.count === commits.starts.length,
          'A has the answer of every commit',
          45_000,
        );
        const before = commits.starts.length;
        a.proxy.stall(true);
        held.open();
        // A finished the five: its commit of first + 10 is sent, and hangs in the proxy.
        await waitUntil(() => commits.starts.length > before, 'A starts a commit', 45_000);
        await waitUntil(
          async () => ((await admin.describeGroups({ groups: [group] })).get(group)?.members.size ?? 0) === 0,
          'the broker to drop A from the group',
          30_000,
        );
        const memberB = await b.subscribe(group, [topic], (envelope: Envelope) =>
          Promise.resolve(ackOutcome(envelope)),
        );
        await publish(5, 'after');
        await waitUntil(async () => (await committed(0)) === first + 15n, 'B commits all fifteen', 45_000);
        await memberB.close();
        // A runs again and closes at once: its held commit arrives with a generation that is gone.
        a.proxy.stall(false);
        await memberA.close();
        expect(await committed(0)).toBe(first + 15n);
      } finally {
        a.proxy.stall(false);
        commits.stop();
        stopListening('tracing:plt:kafka:consumer:commits:asyncEnd', onAnswer);
        await admin.close();
        await b.close();
        await a.close();
      }
    },
  );

  it.skipIf(!postgres.available)(
    'a commit lost with the connection redelivers the record, and the ledger absorbs the copy',
    async () => {
      const world = await pointsSchema(postgres.url, 4);
      try {
        const { transport } = proxied;
        const ledger = new PostgresLedger({ pool: world.pool, schema: world.schema });
        await ledger.init();
        const outcomes: string[] = [];
        let effects = 0;
        let dropped = false;
        const pipeline = createPipeline<PgClientLike, { id: string }>({
          ledger,
          group,
          key: { jsonPath: 'id' },
          retry: new RetryPolicy({ name: 'test', delays: ['50ms'] }),
          onOutcome: (outcome) => {
            outcomes.push(outcome.kind);
          },
          handler: async (_event, ctx) => {
            await world.addPoints(ctx.tx, 'user-1', 100);
            effects++;
          },
        });
        subscriptions.push(
          await transport.subscribe(group, [topic], {
            process: async (envelope) => {
              const outcome = await pipeline.process(envelope);
              if (!dropped) {
                // The effect is committed; the connection goes before the offset commit reaches Kafka.
                dropped = true;
                await proxied.dropConnections();
              }
              return outcome;
            },
          }),
        );
        await transport.publish({ topic, key: 'evt-1', body: { id: 'evt-1' } });
        await waitUntil(() => outcomes.includes('duplicate'), 'the redelivered copy absorbed');
        expect(outcomes.slice(0, 2)).toEqual(['executed', 'duplicate']);
        expect(effects).toBe(1);
        expect(await world.balance('user-1')).toBe(100);
      } finally {
        await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
        await world.close();
      }
    },
  );
});
