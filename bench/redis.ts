import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import Database from 'better-sqlite3';
import { createClient } from 'redis';
import { createPipeline, type Pipeline } from '../src/consumer/pipeline.js';
import type { Envelope } from '../src/core/envelope.js';
import type { ClaimRequest } from '../src/ledger/ledger.js';
import { RedisLedger } from '../src/ledger/redis/redis-ledger.js';
import { fromNodeRedis } from '../src/ledger/redis/redis-like.js';
import { SqliteLedger } from '../src/ledger/sqlite/sqlite-ledger.js';
import { TieredLedger } from '../src/ledger/tiered/tiered-ledger.js';
import { sideBySide, type BenchResult, type Contender, type Suite } from './harness.js';

interface Payment {
  readonly eventId: string;
  readonly userId: string;
}

const encoder = new TextEncoder();
/** Keys completed before the duplicate workloads start; duplicates cycle through them. */
const SEEDED = 1000;
const CONCURRENCIES = [1, 64] as const;
/** Deliveries per `processBatch` call in the batch rows. */
const BATCH = 100;

function envelope(eventId: string, sequence: number): Envelope {
  const body = encoder.encode(JSON.stringify({ eventId, userId: `user-${sequence % 1000}` }));
  return { brokerId: `b:${eventId}:${sequence}`, topic: 'payments', headers: {}, body, deliveryCount: 1 };
}

/**
 * Deduplication on Redis, side by side in one run, one node-redis client for all: a raw `SET NX PX`
 * per message, and the raw two commands that do what a claim + completion does; RedisLedger through
 * the pipeline (leased: claim, handler, complete), batched (the default) and not; TieredLedger
 * (Redis in front of SQLite) on first deliveries and on duplicates with a warm cache; and AWS
 * Powertools idempotency with its Redis persistence layer. `:duplicates` rows replay keys already done.
 */
export const suite: Suite = {
  name: 'redis',
  description:
    'dedup on Redis: raw SET NX PX vs RedisLedger (leased), TieredLedger (over SQLite) and Powertools idempotency',
  async run({ seconds }) {
    const url = process.env.ONCEMQ_REDIS_URL ?? 'redis://127.0.0.1:6379';
    const client = createClient({ url });
    client.on('error', () => undefined);
    await client.connect();
    const prefix = `oncemq-bench-${randomUUID().slice(0, 8)}`;
    const dir = mkdtempSync(join(tmpdir(), 'oncemq-bench-'));
    const db = new Database(join(dir, 'ledger.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    const redis = fromNodeRedis(client);
    const leasedLedger = new RedisLedger({ client: redis, prefix: `${prefix}:ledger` });
    const unbatchedLedger = new RedisLedger({ client: redis, prefix: `${prefix}:unbatched`, batch: false });
    const tieredLedger = new TieredLedger({
      ledger: new SqliteLedger({ database: db }),
      redis,
      prefix: `${prefix}:tiered`,
    });
    await leasedLedger.init();
    await unbatchedLedger.init();
    await tieredLedger.init();
    const handler = (payment: Payment): { credited: number; userId: string } => ({
      credited: 100,
      userId: payment.userId,
    });
    const pipeline = (ledger: RedisLedger | TieredLedger, group: string): Pipeline =>
      createPipeline<unknown, Payment>({ ledger, group, key: { jsonPath: 'eventId' }, handler });
    // As in a Lambda: the context gives the in-progress expiry (without it Powertools warns on every call).
    const config = new IdempotencyConfig({ eventKeyJmesPath: 'eventId' });
    config.registerLambdaContext({ getRemainingTimeInMillis: () => 30_000 } as Parameters<
      IdempotencyConfig['registerLambdaContext']
    >[0]);
    const powertools = makeIdempotent((payment: Payment) => Promise.resolve(handler(payment)), {
      persistenceStore: new CachePersistenceLayer({ client }),
      config,
      keyPrefix: `${prefix}:powertools`,
    });

    const contenders: Contender[] = [];
    for (const concurrency of CONCURRENCIES) {
      const run = `c${concurrency}`;
      const unique = (name: string): string => `${name}-${run}`;
      // First deliveries: every message carries a new key.
      contenders.push(
        {
          name: 'raw',
          concurrency,
          op: (i) =>
            client.set(`${prefix}:raw:{${unique('u')}-${i}}`, '1', {
              condition: 'NX',
              expiration: { type: 'PX', value: 604_800_000 },
            }),
        },
        {
          name: 'raw:claim+complete',
          concurrency,
          note: 'the same work by hand: SET NX PX GET, then SET PX of the finished record',
          op: async (i) => {
            const key = `${prefix}:raw-cc:{${unique('u')}-${i}}`;
            await client.set(key, 'PROCESSING', {
              condition: 'NX',
              GET: true,
              expiration: { type: 'PX', value: 604_800_000 },
            });
            await client.set(key, 'SUCCESS', { expiration: { type: 'PX', value: 604_800_000 } });
          },
        },
        {
          name: 'oncemq:leased',
          concurrency,
          baseline: 'raw:claim+complete',
          peer: 'peer:powertools',
          op: processor(pipeline(leasedLedger, unique('leased'))),
        },
        {
          name: 'oncemq:leased:unbatched',
          concurrency,
          baseline: 'raw:claim+complete',
          peer: 'peer:powertools',
          note: 'the same, with batch: false (one command per key)',
          op: processor(pipeline(unbatchedLedger, unique('unbatched'))),
        },
        {
          name: 'oncemq:redis-ledger',
          concurrency,
          baseline: 'raw:claim+complete',
          peer: 'peer:powertools',
          note: 'RedisLedger claim + complete, without the pipeline',
          op: async (i) => {
            const claimed = await leasedLedger.claim(request(unique('ledger'), i));
            if (claimed.status === 'acquired') await leasedLedger.complete(claimed.claim, null);
          },
        },
        {
          name: 'oncemq:tiered',
          concurrency,
          baseline: 'raw:claim+complete',
          peer: 'peer:powertools',
          op: processor(pipeline(tieredLedger, unique('tiered'))),
        },
        {
          name: 'peer:powertools',
          concurrency,
          baseline: 'raw:claim+complete',
          op: (i) => powertools({ eventId: `${unique('pt')}-${i}`, userId: `user-${i % 1000}` }),
        },
      );
      if (concurrency === 1) {
        // One consumer taking its messages in batches, as stream consumers do.
        contenders.push({
          name: 'oncemq:leased:batch',
          concurrency,
          perOp: BATCH,
          baseline: 'raw:claim+complete',
          peer: 'peer:powertools',
          note: `processBatch of ${BATCH}: the claims in one call, handlers in order, completions shared`,
          op: batchProcessor(pipeline(leasedLedger, unique('leased-batch'))),
        });
      }
      // Duplicates: the same keys, already completed, again and again.
      const rawKeys = Array.from({ length: SEEDED }, (_, i) => `${prefix}:raw-dup:{${run}-${i}}`);
      for (const key of rawKeys)
        await client.set(key, '1', { expiration: { type: 'PX', value: 604_800_000 } });
      const leasedDup = pipeline(leasedLedger, unique('leased-dup'));
      const tieredDup = pipeline(tieredLedger, unique('tiered-dup'));
      const seeded = Array.from({ length: SEEDED }, (_, i) => envelope(`dup-${i}`, i));
      for (const message of seeded) {
        await leasedDup.process(message);
        await tieredDup.process(message); // executed in SQLite, then written to Redis: the cache is warm
        await powertools({ eventId: `${unique('pt-dup')}-${message.brokerId}`, userId: 'user-1' });
      }
      contenders.push(
        {
          name: 'raw:duplicates',
          concurrency,
          op: (i) =>
            client.set(rawKeys[i % SEEDED] ?? '', '1', {
              condition: 'NX',
              expiration: { type: 'PX', value: 604_800_000 },
            }),
        },
        {
          name: 'oncemq:leased:duplicates',
          concurrency,
          baseline: 'raw:duplicates',
          peer: 'peer:powertools:duplicates',
          op: (i) => leasedDup.process(seeded[i % SEEDED] ?? envelope('x', i)),
        },
        {
          name: 'oncemq:redis-ledger:duplicates',
          concurrency,
          baseline: 'raw:duplicates',
          peer: 'peer:powertools:duplicates',
          note: 'RedisLedger claim only (a duplicate), without the pipeline',
          op: (i) => leasedLedger.claim(request(unique('leased-dup'), i % SEEDED, 'dup')),
        },
        {
          name: 'oncemq:tiered:duplicates',
          concurrency,
          baseline: 'raw:duplicates',
          peer: 'peer:powertools:duplicates',
          op: (i) => tieredDup.process(seeded[i % SEEDED] ?? envelope('x', i)),
        },
        {
          name: 'peer:powertools:duplicates',
          concurrency,
          baseline: 'raw:duplicates',
          op: (i) =>
            powertools({
              eventId: `${unique('pt-dup')}-${seeded[i % SEEDED]?.brokerId ?? ''}`,
              userId: 'user-1',
            }),
        },
      );
    }

    let results: BenchResult[];
    try {
      results = await sideBySide(contenders, { seconds });
    } finally {
      for await (const keys of client.scanIterator({ MATCH: `${prefix}:*`, COUNT: 1000 })) {
        if (keys.length > 0) await client.del(keys);
      }
      await tieredLedger.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
      client.destroy();
    }
    const cache = tieredLedger.cacheMetrics();
    return results.map((r) =>
      r.name.startsWith('oncemq:tiered')
        ? { ...r, note: `cache hits ${cache.hits}, misses ${cache.misses}` }
        : r,
    );
  },
};

function request(group: string, sequence: number, key = 'ledger'): ClaimRequest {
  return {
    group,
    key: key === 'dup' ? `dup-${sequence}` : `${key}-${sequence}`,
    fingerprint: null,
    brokerId: `b:${sequence}`,
    topic: 'payments',
    leaseMs: 30_000,
  };
}

function batchProcessor(pipeline: Pipeline): (sequence: number) => Promise<unknown> {
  const tag = randomUUID().slice(0, 8);
  return async (n) => {
    const batch = Array.from({ length: BATCH }, (_, i) => envelope(`${tag}-${n}-${i}`, n * BATCH + i));
    for (const outcome of await pipeline.processBatch(batch)) {
      if (outcome.kind !== 'executed') throw new Error(`unexpected outcome ${outcome.kind}`);
    }
  };
}

function processor(pipeline: Pipeline): (sequence: number) => Promise<unknown> {
  const tag = randomUUID().slice(0, 8);
  return (i) => pipeline.process(envelope(`${tag}-${i}`, i));
}
