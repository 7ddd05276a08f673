/**
 * The child process of `npm run bench -- pipeline` (bench/pipeline.ts starts it with a young
 * generation large enough that no garbage collection runs inside a measured window): the pipeline
 * alone over an in-memory ledger, no I/O, one by one and in batches, beside the same work by hand.
 * Prints one JSON object: the rows with each repetition's figures.
 */
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { createPipeline } from '../src/consumer/pipeline.js';
import type { Envelope } from '../src/core/envelope.js';
import type { Outcome } from '../src/core/outcome.js';
import { MemoryPipelineLedger, type Points } from './memory-pipeline-ledger.js';

export interface PipelineRunOptions {
  readonly messages: number;
  readonly repetitions: number;
  readonly warmup: number;
  readonly batchSize: number;
}

/** One repetition of one row: wall and CPU time and bytes allocated over its window. */
export interface PipelineSample {
  readonly wallNs: number;
  readonly cpuNs: number;
  /** Growth of the used heap over the window; `undefined` when a collection ran inside it. */
  readonly bytes: number | undefined;
}

export interface PipelineRow {
  readonly name: string;
  readonly baseline?: string;
  readonly note: string;
  readonly samples: PipelineSample[];
}

interface Payment {
  readonly eventId: string;
  readonly userId: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** What a transport hands the pipeline: the envelope of one delivery, built per message. */
function envelope(prefix: string, sequence: number): Envelope {
  const body = encoder.encode(
    JSON.stringify({ eventId: `${prefix}-${sequence}`, userId: `user-${sequence % 1000}` }),
  );
  return { brokerId: `${prefix}:${sequence}`, topic: 'payments', headers: {}, body, deliveryCount: 1 };
}

/** A row that measured anything but first deliveries executed would measure another path. */
function executed(outcome: Outcome): void {
  if (outcome.kind !== 'executed')
    throw new Error(`expected an executed delivery, got ${JSON.stringify(outcome)}`);
}

const addPoints = (points: Points, userId: string): void => {
  points.set(userId, (points.get(userId) ?? 0) + 100);
};

/** A workload: runs messages [from, from + count) and resolves when they are settled. */
type Workload = (from: number, count: number) => Promise<void>;

function workloads(batchSize: number): { name: string; baseline?: string; note: string; run: Workload }[] {
  const points: Points = new Map();
  const ledger = new MemoryPipelineLedger(points);
  const pipeline = (mode: 'transactional' | 'leased', group: string) =>
    createPipeline<Points, Payment>({
      ledger,
      group,
      mode,
      key: { jsonPath: 'eventId' },
      handler: (payment) => addPoints(points, payment.userId),
    });
  const single = pipeline('transactional', 'single');
  const leased = pipeline('leased', 'leased0');
  const batched = pipeline('transactional', 'batch0');
  // The same work by hand: read the key from the body, claim it in a map, apply the effect, record it.
  const claimed = new Map<string, { status: string; result: string | null }>();
  const byHand = async (message: Envelope): Promise<void> => {
    const payment = JSON.parse(decoder.decode(message.body)) as Payment;
    await Promise.resolve();
    if (claimed.has(payment.eventId)) return;
    claimed.set(payment.eventId, { status: 'SUCCESS', result: null });
    addPoints(points, payment.userId);
  };
  const inBatches = async (
    from: number,
    count: number,
    prefix: string,
    each: (messages: Envelope[]) => Promise<unknown>,
  ): Promise<void> => {
    for (let start = from; start < from + count; start += batchSize) {
      const size = Math.min(batchSize, from + count - start);
      await each(Array.from({ length: size }, (_, i) => envelope(prefix, start + i)));
    }
  };
  return [
    {
      name: 'raw:pipeline:single',
      note: 'by hand: JSON key, a map claim, the effect',
      run: async (from, count) => {
        for (let i = from; i < from + count; i++) await byHand(envelope('raw', i));
      },
    },
    {
      name: 'oncemq:pipeline:single',
      baseline: 'raw:pipeline:single',
      note: 'process(), transactional, fingerprint on',
      run: async (from, count) => {
        for (let i = from; i < from + count; i++) executed(await single.process(envelope('one', i)));
      },
    },
    {
      name: 'oncemq:pipeline:leased',
      baseline: 'raw:pipeline:single',
      note: 'process(), leased, fingerprint on',
      run: async (from, count) => {
        for (let i = from; i < from + count; i++) executed(await leased.process(envelope('lsd', i)));
      },
    },
    {
      name: 'raw:pipeline:batch',
      note: `by hand, batches of ${batchSize}`,
      run: (from, count) =>
        inBatches(from, count, 'rawb', async (messages) => {
          await Promise.resolve();
          for (const message of messages) {
            const payment = JSON.parse(decoder.decode(message.body)) as Payment;
            if (claimed.has(payment.eventId)) continue;
            claimed.set(payment.eventId, { status: 'SUCCESS', result: null });
            addPoints(points, payment.userId);
          }
        }),
    },
    {
      name: 'oncemq:pipeline:batch',
      baseline: 'raw:pipeline:batch',
      note: `processBatch(), batches of ${batchSize}, a handler per message`,
      run: (from, count) =>
        inBatches(from, count, 'bat', async (messages) => {
          for (const outcome of await batched.processBatch(messages)) executed(outcome);
        }),
    },
  ];
}

/** Start times of the collections seen (`performance.now()` scale). */
const collections: number[] = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) collections.push(entry.startTime);
}).observe({ entryTypes: ['gc'] });

const turn = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function measure(run: Workload, from: number, count: number): Promise<PipelineSample> {
  (globalThis as { gc?: () => void }).gc?.();
  await turn();
  const opened = performance.now();
  const heap = getHeapStatistics().used_heap_size;
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  await run(from, count);
  const wallNs = Number(process.hrtime.bigint() - start);
  const used = process.cpuUsage(cpu);
  const bytes = getHeapStatistics().used_heap_size - heap;
  const closed = performance.now();
  // The observer hears of a collection a little later: give it time before asking.
  await turn(5);
  const clean = !collections.some((at) => at >= opened && at <= closed);
  return { wallNs, cpuNs: (used.user + used.system) * 1000, bytes: clean ? bytes : undefined };
}

export async function runPipelineBench(options: PipelineRunOptions): Promise<PipelineRow[]> {
  const rows = workloads(options.batchSize).map((w) => ({ ...w, samples: [] as PipelineSample[] }));
  for (const row of rows) await row.run(0, options.warmup);
  let next = options.warmup;
  // Side by side: each repetition runs every row once, so a noisy second falls on all of them.
  for (let r = 0; r < options.repetitions; r++) {
    for (const row of rows) row.samples.push(await measure(row.run, next, options.messages));
    next += options.messages;
  }
  return rows.map(({ name, baseline, note, samples }) => ({ name, baseline, note, samples }));
}

if (process.argv[2] !== undefined) {
  const options = JSON.parse(process.argv[2]) as PipelineRunOptions;
  console.log(JSON.stringify(await runPipelineBench(options)));
}
