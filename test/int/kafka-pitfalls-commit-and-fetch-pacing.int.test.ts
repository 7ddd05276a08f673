// Kafka pitfalls of pacing: commits started at most every 50 ms and once when closing, batches handed
// over while the fetch is still read, and a backlog read a fetch at a time.
import { subscribe as listen, unsubscribe as stopListening } from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { proxiedKafka, type ProxiedKafka } from '../support/kafka.js';
import { gate, kafka, kafkaPitfallScope } from '../support/kafka-pitfalls.js';
import { ackOutcome, waitUntil } from '../support/local-points.js';
import { sleep } from '../support/points.js';

describe.skipIf(!kafka.available)('Kafka pitfalls', () => {
  let proxied: ProxiedKafka;
  let topic: string;
  let group: string;
  const { committed, publishToOnePartition, commitStarts } = kafkaPitfallScope((place) => {
    ({ proxied, topic, group } = place);
  });

  it('starts a commit at most every 50 ms while records finish one by one, and commits the rest when closing', async () => {
    const { transport } = proxied;
    const { partition, first } = await publishToOnePartition(40);
    const { starts, stop } = commitStarts();
    try {
      let done = 0;
      const subscription = await transport.subscribe(
        group,
        [topic],
        async (envelope) => {
          await sleep(5);
          done++;
          return ackOutcome(envelope);
        },
        { concurrency: 1 },
      );
      await waitUntil(() => done === 40, 'every record');
      await subscription.close();
    } finally {
      stop();
    }
    // Forty records finishing one after another: a handful of commits, not one per record.
    expect(starts.length).toBeGreaterThan(0);
    expect(starts.length).toBeLessThan(20);
    const gaps = starts.slice(1).map((start, i) => start - (starts[i] as number));
    // The last one may be the closing commit, which does not wait.
    expect(gaps.slice(0, -1).filter((gap) => gap < 45)).toEqual([]);
    expect(await committed(partition)).toBe(first + 40n);
  });

  it('commits once when closing, after the records in flight finished, not once per record finishing meanwhile', async () => {
    const { transport } = proxied;
    const { partition, first } = await publishToOnePartition(10);
    const { starts, stop } = commitStarts();
    let closing = Number.POSITIVE_INFINITY;
    try {
      let done = 0;
      let held = 0;
      let arrived = 0;
      const last = gate();
      // The last two records are still running when the subscription closes.
      const subscription = await transport.subscribe(
        group,
        [topic],
        async (envelope) => {
          // Records of one partition arrive in order: the ninth and tenth are held.
          if (arrived++ >= 8) {
            held++;
            await last.opened;
          }
          done++;
          return ackOutcome(envelope);
        },
        { concurrency: 2 },
      );
      await waitUntil(() => done === 8 && held === 2, 'every record but the last two');
      await sleep(200);
      closing = Date.now();
      const closed = subscription.close();
      last.open();
      await closed;
      expect(done).toBe(10);
    } finally {
      stop();
    }
    expect(starts.filter((start) => start >= closing)).toHaveLength(1);
    expect(await committed(partition)).toBe(first + 10n);
  });

  /**
   * Consumes `count` records of the topic with `options`, acking each batch, and answers how many
   * records the client had read (its own trace of each, this group's only) as each batch was handed over.
   */
  const readAtEachBatch = async (
    transport: ProxiedKafka['transport'],
    count: number,
    options: { concurrency: number; batchSize: number },
  ): Promise<number[]> => {
    let received = 0;
    const onReceive = (context: unknown): void => {
      if ((context as { client?: { groupId?: string } }).client?.groupId === group) received++;
    };
    const receivedAtBatch: number[] = [];
    let done = 0;
    listen('tracing:plt:kafka:consumer:receives:start', onReceive);
    try {
      const subscription = await transport.subscribe(
        group,
        [topic],
        {
          process: (envelope) => Promise.resolve(ackOutcome(envelope)),
          processBatch: (envelopes) => {
            receivedAtBatch.push(received);
            done += envelopes.length;
            return Promise.resolve(envelopes.map((envelope) => ackOutcome(envelope)));
          },
        },
        options,
      );
      await waitUntil(() => done === count, 'every record');
      await subscription.close();
    } finally {
      stopListening('tracing:plt:kafka:consumer:receives:start', onReceive);
    }
    return receivedAtBatch;
  };

  it('starts a full batch while the client is still reading the rest of the fetch', async () => {
    const { transport } = proxied;
    // 300 records in one partition, all stored before the member joins: its first fetch brings them together.
    await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        transport.publish({ topic, key: `b-${i}`, orderingKey: 'one', body: {} }),
      ),
    );
    const receivedAtBatch = await readAtEachBatch(transport, 300, { concurrency: 200, batchSize: 100 });
    // The first batch was handed over as its hundredth record was read, not after the last of the fetch.
    expect(receivedAtBatch[0]).toBe(100);
  });

  it('reads a backlog fetchMaxBytes at a time: the first batch starts after the first fetch, not after the whole backlog was read', async () => {
    const small = await proxiedKafka(kafka.bootstrap, { fetchMaxBytes: 64 * 1024 });
    try {
      // 20 produce requests of 50 records of ~600 bytes in one partition: 20 record batches of ~30 KiB.
      const body = { pad: 'x'.repeat(600) };
      for (let round = 0; round < 20; round++) {
        await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            small.transport.publish({ topic, key: `f-${round}-${i}`, orderingKey: 'one', body }),
          ),
        );
      }
      // Room for the whole backlog at once: only the fetch size holds the first batch back.
      const receivedAtBatch = await readAtEachBatch(small.transport, 1000, {
        concurrency: 1000,
        batchSize: 1000,
      });
      // The ~600 KiB backlog fits in one fetch of the client's own 10 MiB: 64 KiB bring two batches at most.
      expect(receivedAtBatch[0]).toBeGreaterThan(0);
      expect(receivedAtBatch[0]).toBeLessThanOrEqual(100);
    } finally {
      await small.close();
    }
  });
});
