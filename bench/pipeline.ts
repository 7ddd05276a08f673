import { execFile } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { wholeFlag } from './flags.js';
import { median, type BenchResult, type Suite } from './harness.js';
import type { PipelineRow, PipelineRunOptions } from './pipeline-run.js';

/**
 * V8 flags of the measuring process: a young generation of 128 MiB, so that a window of a few
 * thousand messages allocates without a collection and the used heap's growth is what it allocated.
 */
const CHILD_FLAGS = ['--expose-gc', '--min-semi-space-size=128', '--max-semi-space-size=128'];

const spread = (values: readonly number[]): readonly [number, number] => [
  Math.round(Math.min(...values)),
  Math.round(Math.max(...values)),
];

function toResult(row: PipelineRow, rows: readonly PipelineRow[], messages: number): BenchResult {
  const rates = row.samples.map((s) => messages / (s.wallNs / 1e9));
  const cpu = row.samples.map((s) => s.cpuNs / messages);
  const bytes = row.samples.flatMap((s) => (s.bytes === undefined ? [] : [s.bytes / messages]));
  const base = rows.find((other) => other.name === row.baseline);
  // The ratio of rates in each repetition: both rows ran in it, one after the other.
  const ratios = base?.samples.map((b, i) => b.wallNs / (row.samples[i]?.wallNs ?? Infinity));
  const cpuNanos = Math.round(median(cpu));
  const allocated = bytes.length === 0 ? undefined : Math.round(median(bytes));
  return {
    name: row.name,
    concurrency: 1,
    messagesPerSecond: Math.round(median(rates)),
    messages: messages * row.samples.length,
    repetitions: row.samples.length,
    ...(row.baseline === undefined ? {} : { baseline: row.baseline }),
    ...(ratios === undefined
      ? {}
      : { ratio: Number(median(ratios).toFixed(3)), ratios: ratios.map((r) => Number(r.toFixed(3))) }),
    cpuMicrosPerMessage: Number((cpuNanos / 1000).toFixed(2)),
    cpuNanosPerMessage: cpuNanos,
    cpuNanosSpread: spread(cpu),
    ...(allocated === undefined ? {} : { bytesPerMessage: allocated, bytesSpread: spread(bytes) }),
    loadAverage: Number((loadavg()[0] ?? 0).toFixed(2)),
    cores: availableParallelism(),
    note: `${row.note}; ${cpuNanos} ns and ${allocated ?? '?'} B per message${bytes.length < row.samples.length ? ` (${row.samples.length - bytes.length} windows had a GC)` : ''}`,
  };
}

/**
 * The pipeline alone (no I/O): an in-memory ledger, envelopes built as a transport builds them, one
 * by one and in batches, beside the same work by hand. Its figures are CPU time and bytes allocated
 * per message, which a busy neighbour does not move the way it moves a rate.
 */
export const suite: Suite = {
  name: 'pipeline',
  description: 'the pipeline alone over an in-memory ledger: CPU ns and bytes allocated per message',
  async run({ flags }) {
    const options: PipelineRunOptions = {
      messages: wholeFlag(flags, 'messages', 2000),
      repetitions: wholeFlag(flags, 'repetitions', 15),
      warmup: wholeFlag(flags, 'warmup', 5000),
      batchSize: wholeFlag(flags, 'batchSize', 64),
    };
    const child = fileURLToPath(new URL('./pipeline-run.js', import.meta.url));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [...CHILD_FLAGS, child, JSON.stringify(options)],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    const rows = JSON.parse(stdout) as PipelineRow[];
    return rows.map((row) => toResult(row, rows, options.messages));
  },
};
