/**
 * What the PostgreSQL and MySQL suites share: the example's deliveries (a payment credits 100 points
 * to one of `USERS` users), the oncemq cases built on a ledger, and the plan that measures each group
 * of cases side by side at concurrency 1 and 16. The suites keep their own SQL, scratch tables and
 * raw consumers.
 */
import { createPipeline, type Pipeline } from '../src/consumer/pipeline.js';
import type { Outcome } from '../src/core/outcome.js';
import { createEnvelope, type Envelope } from '../src/core/envelope.js';
import type { BatchWork, ClaimRequest, Ledger } from '../src/ledger/ledger.js';
import { sideBySide, type BenchResult, type Contender } from './harness.js';

export const USERS = 1000;
/** Messages one op of a batch case handles. */
export const BATCH = 100;

interface Payment {
  readonly eventId: string;
  readonly userId: string;
}

/**
 * A case of a SQL suite: `op(tag, n)` handles `perOp` messages. `tag` names the case and its
 * concurrency and `n` keeps growing through warm-up and rounds, so keys made of both are fresh on
 * every op: no case measures duplicates by accident.
 */
export interface SqlCase {
  readonly name: string;
  /** @default 1 */
  readonly perOp?: number;
  /** The raw case doing the same work. @default 'raw' */
  readonly baseline?: string;
  op(tag: string, n: number): Promise<unknown>;
}

/** The user message (or batch) `n` credits. */
export function userOf(n: number): string {
  return `user-${n % USERS}`;
}

/** Delivery `n` of a case; its event id, the business key, is `<tag>-<n>`. */
export function envelope(tag: string, n: number): Envelope {
  return createEnvelope({
    brokerId: `${tag}-${n}`,
    topic: 'payments',
    body: { eventId: `${tag}-${n}`, orderId: `order-${n}`, userId: userOf(n), amount: 100 },
  });
}

const decoder = new TextDecoder();

/** The raw consumer receives the same delivery and decodes it, as any consumer must. */
export function decode(delivered: Envelope): Payment {
  return JSON.parse(decoder.decode(delivered.body)) as Payment;
}

/** The deliveries of batch `n` as a transport hands them: every one credits `userOf(n)`. */
export function batchEnvelopes(tag: string, n: number): Envelope[] {
  return Array.from({ length: BATCH }, (_, i) => batchEnvelope(tag, n, i));
}

/**
 * What a consumer written by hand reads from a batch: each delivery decoded, its event id (the key)
 * and broker id. The raw batch rows do this work, as the pipeline must, so that the comparison is of
 * the same work.
 */
export function decodeBatch(delivered: readonly Envelope[]): { keys: string[]; brokerIds: string[] } {
  const keys: string[] = [];
  const brokerIds: string[] = [];
  for (const one of delivered) {
    keys.push(decode(one).eventId);
    brokerIds.push(one.brokerId);
  }
  return { keys, brokerIds };
}

/** The example's pipeline: group `points`, keyed by the event id, the handler credits the payment. */
export function pointsPipeline<Tx>(
  ledger: Ledger<Tx>,
  credit: (tx: Tx, userId: string) => Promise<unknown>,
): Pipeline {
  return createPipeline<Tx, Payment>({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: async (payment, ctx) => {
      await credit(ctx.tx, payment.userId);
    },
  });
}

function executed(outcome: Outcome): void {
  if (outcome.kind !== 'executed') throw new Error(`unexpected outcome ${outcome.kind}`);
}

/** One message at a time through `pipeline.process`. */
export function processCase(name: string, pipeline: Pipeline): SqlCase {
  return { name, op: async (tag, n) => executed(await pipeline.process(envelope(tag, n))) };
}

/** `BATCH` messages through `pipeline.processBatch`, the handler once per message. */
export function processBatchCase(pipeline: Pipeline): SqlCase {
  return {
    name: 'oncemq:processBatch',
    perOp: BATCH,
    baseline: 'raw:batch',
    op: async (tag, n) => {
      const batch = Array.from({ length: BATCH }, (_, i) => envelope(tag, n * BATCH + i));
      (await pipeline.processBatch(batch)).forEach(executed);
    },
  };
}

/**
 * The example's pipeline with a batch handler: the won events of a batch credit their points with one
 * statement per user (a batch of this suite is one user's, as in `raw:batch`).
 */
export function pointsBatchPipeline<Tx>(
  ledger: Ledger<Tx>,
  creditMany: (tx: Tx, userId: string, count: number) => Promise<unknown>,
): Pipeline {
  return createPipeline<Tx, Payment>({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    batchHandler: async (events, ctx) => {
      const perUser = new Map<string, number>();
      for (const { message } of events) perUser.set(message.userId, (perUser.get(message.userId) ?? 0) + 1);
      for (const [userId, count] of perUser) await creditMany(ctx.tx, userId, count);
    },
  });
}

/** Delivery `i` of batch `n`: like `raw:batch`, every delivery of batch `n` credits `userOf(n)`. */
function batchEnvelope(tag: string, n: number, i: number): Envelope {
  const eventId = `${tag}-${n}-${i}`;
  return createEnvelope({
    brokerId: eventId,
    topic: 'payments',
    body: { eventId, orderId: `order-${n}`, userId: userOf(n), amount: 100 },
  });
}

/** `BATCH` messages through `pipeline.processBatch` with a batch handler: one business statement per batch. */
export function processBatchHandlerCase(pipeline: Pipeline): SqlCase {
  return {
    name: 'oncemq:processBatch:handler',
    perOp: BATCH,
    baseline: 'raw:batch',
    op: async (tag, n) => {
      (await pipeline.processBatch(batchEnvelopes(tag, n))).forEach(executed);
    },
  };
}

/** `BATCH` claims in one `transactionMany`, crediting the messages of batch `n` with one statement. */
export function transactionManyCase<Tx>(
  ledger: { transactionMany(requests: readonly ClaimRequest[], work: BatchWork<Tx>): Promise<unknown> },
  creditMany: (tx: Tx, userId: string, count: number) => Promise<unknown>,
): SqlCase {
  return {
    name: 'oncemq:batch',
    perOp: BATCH,
    baseline: 'raw:batch',
    op: (tag, n) => {
      const { keys, brokerIds } = decodeBatch(batchEnvelopes(tag, n));
      const requests = keys.map((key, i): ClaimRequest => ({
        group: 'points',
        key,
        fingerprint: null,
        brokerId: brokerIds[i] ?? key,
        topic: 'payments',
        leaseMs: 30_000,
      }));
      return ledger.transactionMany(requests, async (tx, won) => {
        if (won.length > 0) await creditMany(tx, userOf(n), won.length);
        return won.map(() => null);
      });
    },
  };
}

/**
 * Measures each group of cases side by side ({@link sideBySide}), at concurrency 1 and then 16,
 * `seconds` per group and concurrency.
 */
export async function measureGroups(
  groups: readonly (readonly SqlCase[])[],
  seconds: number,
): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  for (const cases of groups) {
    for (const concurrency of [1, 16]) {
      const contenders = cases.map((c): Contender => ({
        name: c.name,
        concurrency,
        perOp: c.perOp ?? 1,
        ...(c.baseline === undefined ? {} : { baseline: c.baseline }),
        op: (n) => c.op(`${c.name}-c${concurrency}`, n),
      }));
      results.push(...(await sideBySide(contenders, { seconds })));
    }
  }
  return results;
}

/** A function that runs `work` in one transaction on a connection from `connect`, then gives it back. */
export function transactionRunner<C extends { query(statement: string): Promise<unknown>; release(): void }>(
  connect: () => Promise<C>,
): (work: (connection: C) => Promise<void>) => Promise<void> {
  return async (work) => {
    const connection = await connect();
    try {
      await connection.query('BEGIN');
      await work(connection);
      await connection.query('COMMIT');
    } finally {
      connection.release();
    }
  };
}
