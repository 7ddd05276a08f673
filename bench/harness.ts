/** Shared benchmark harness: every suite reports in one machine-readable shape. */

export interface BenchResult {
  readonly name: string;
  readonly concurrency: number;
  readonly messagesPerSecond: number;
  /** Latency of one op; absent on rows that time a drain of pre-published messages as a whole. */
  readonly p50Ms?: number;
  readonly p99Ms?: number;
  /** Messages measured. */
  readonly messages?: number;
  /** Anything else a suite wants to say about this row (batch size, workload). */
  readonly note?: string;
  /** The row (same concurrency) this one is compared with: the raw driver doing the same work. @default 'raw' */
  readonly baseline?: string;
  /** A peer library's row (same concurrency) this one is also compared with, as a speed-up. */
  readonly peer?: string;
  /** Drains: this row's rate divided by its baseline's, over all repetitions. */
  readonly ratio?: number;
  /** Drains: the same ratio in each repetition (the spread shows the machine's noise). */
  readonly ratios?: readonly number[];
  /** Drains: messages the row drained, untimed, before its repetitions (the warm-up). */
  readonly warmupMessages?: number;
  /** Drains: how many times the row drained its messages. */
  readonly repetitions?: number;
  /** Drains: confirmed publishes per second while the messages were stored (not part of `messagesPerSecond`). */
  readonly publishPerSecond?: number;
  /**
   * CPU time (user + system) of this process per message while the row ran, in microseconds: in a
   * drain, while consuming; side by side, over the row's slices. For work that runs in process (an
   * in-memory SQLite ledger) it is the inverse of the rate without the neighbours' noise: a busy
   * second on a shared machine stretches a slice's wall time, not the CPU it used.
   */
  readonly cpuMicrosPerMessage?: number;
  /**
   * Drains, on Linux: `cpuMicrosPerMessage` split between the process's main thread (JavaScript,
   * the drivers' parsing) and its other threads (V8's garbage collector and compiler, libuv's pool),
   * read from /proc in 10 ms ticks over whole drains.
   */
  readonly mainThreadCpuMicrosPerMessage?: number;
  /**
   * The `pipeline` suite: CPU time per message in nanoseconds (the median of the repetitions), with
   * the smallest and largest repetition beside it.
   */
  readonly cpuNanosPerMessage?: number;
  readonly cpuNanosSpread?: readonly [number, number];
  /**
   * The `pipeline` suite: bytes allocated per message (the used heap's growth over a window in which
   * no garbage collection ran, median of the repetitions), with the smallest and largest beside it.
   */
  readonly bytesPerMessage?: number;
  readonly bytesSpread?: readonly [number, number];
  /** The machine's 1-minute load average when the row was measured, and its core count. */
  readonly loadAverage?: number;
  readonly cores?: number;
  readonly otherThreadsCpuMicrosPerMessage?: number;
  /**
   * Drains, on Linux: the CPU the machine's other processes used while this row consumed, per
   * message, by command name (`postgres`, the broker's `java` or `beam.smp`, `nats-server`, … and
   * any neighbour), those of 1 µs or more: what the database and the broker spent on the row's work.
   */
  readonly otherProcessesCpuMicrosPerMessage?: Readonly<Record<string, number>>;
  /**
   * Drains: from subscribing to the first effect, averaged over the drains, in milliseconds (joining
   * the group, the first fetch): part of the consuming time `messagesPerSecond` counts.
   */
  readonly firstEffectMs?: number;
  /**
   * The `http` suite: statements the server sent to PostgreSQL per answered request (the round trips
   * of the row's route; requests left unanswered when a slice stopped count too, so a little high).
   */
  readonly statementsPerMessage?: number;
  /** Drains: the process's largest resident set size while this row consumed, in MiB. */
  readonly peakRssMb?: number;
  /** Drains: the largest growth of the resident set during one of this row's drains, in MiB. */
  readonly rssGrowthMb?: number;
  /**
   * The `leases` suite (bench/leases.ts): what became of the keys held under a rival's claims.
   * `messagesPerSecond` is then keys held per second, `p50Ms`/`p99Ms` the renewals' latency.
   */
  readonly leases?: LeaseCounts;
  /** The `memory` suite (bench/memory.ts): the heap and RSS over one long drain. */
  readonly memory?: MemoryDrain;
}

/** A `memory` row: the heap and RSS sampled after a collection over a drain, and their fitted growth. */
export interface MemoryDrain {
  /** Growth per 100,000 messages after the warm-up, by least squares over the samples, in MiB. */
  readonly heapGrowthMbPer100k: number;
  readonly rssGrowthMbPer100k: number;
  readonly heapMbAfterWarmup: number;
  readonly heapMbAtEnd: number;
  readonly rssMbAfterWarmup: number;
  readonly rssMbAtEnd: number;
  /** Every sample: messages done, the used heap after a collection and the RSS, in MiB. */
  readonly samples: readonly {
    readonly messages: number;
    readonly heapUsedMb: number;
    readonly rssMb: number;
  }[];
}

/** A `leases` row: keys held while a rival claimed them, and what became of them. */
export interface LeaseCounts {
  readonly backend: string;
  readonly leaseMs: number;
  readonly renewEveryMs: number;
  /** How long each owner's handler ran, unless its signal aborted first. */
  readonly holdMs: number;
  /** Keys held (rounds × keys). */
  readonly held: number;
  /** Keys the rival won before their owner's signal aborted: the owner kept working on a taken key. */
  readonly stolen: number;
  /** Keys whose owner's signal aborted (no renewal landed in time): safe, the work was wasted. */
  readonly lost: number;
  readonly renewals: number;
  readonly renewMaxMs: number;
  readonly rivalClaims: number;
  /** Why the lost keys' signals aborted (the cause's text, digits as `N`), and how often. */
  readonly lostReasons: Readonly<Record<string, number>>;
}

export interface SuiteOptions {
  /** Rough wall-clock budget for the whole suite. */
  readonly seconds: number;
  /** Suite-specific flags (`--synchronous normal`). */
  readonly flags: Readonly<Record<string, string>>;
}

export interface Suite {
  readonly name: string;
  readonly description: string;
  run(options: SuiteOptions): Promise<BenchResult[]>;
}

/** One contender: `op(i)` does the work of one message (or one batch, counted as `perOp` messages). */
export interface Contender {
  readonly name: string;
  readonly concurrency: number;
  /** Messages one call of `op` handles. @default 1 */
  readonly perOp?: number;
  readonly note?: string;
  /** See {@link BenchResult.baseline}. */
  readonly baseline?: string;
  /** See {@link BenchResult.peer}. */
  readonly peer?: string;
  op(sequence: number): unknown;
}

/** The median of `values` (the mean of the middle two for an even count); 0 for none. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? 0)
    : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? 0;
}

interface Tally {
  ops: number;
  elapsedMs: number;
  /** User + system CPU time of the process during the row's slices. */
  cpuMicros: number;
  latencies: number[];
}

const newTally = (): Tally => ({ ops: 0, elapsedMs: 0, cpuMicros: 0, latencies: [] });

/** Runs `contender` for `ms` milliseconds with its concurrency; sequence numbers keep growing across rounds. */
async function runFor(
  contender: Contender,
  ms: number,
  next: { value: number },
  tally: Tally,
): Promise<void> {
  const deadline = performance.now() + ms;
  const started = performance.now();
  const cpu = process.cpuUsage();
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const sequence = next.value++;
      const t0 = performance.now();
      await contender.op(sequence);
      tally.latencies.push(performance.now() - t0);
      tally.ops++;
    }
  };
  await Promise.all(Array.from({ length: contender.concurrency }, worker));
  tally.elapsedMs += performance.now() - started;
  const used = process.cpuUsage(cpu);
  tally.cpuMicros += used.user + used.system;
}

/**
 * Measures contenders side by side: the time is cut into rounds and the contenders take turns in
 * each round, so a noisy neighbour slows them alike and the ratios stay meaningful.
 */
export async function sideBySide(
  contenders: readonly Contender[],
  options: {
    seconds: number;
    rounds?: number;
    /** Unmeasured run of each contender before the rounds. @default 1000 */
    warmupMs?: number;
  },
): Promise<BenchResult[]> {
  const rounds = options.rounds ?? 6;
  const sliceMs = (options.seconds * 1000) / (rounds * contenders.length);
  const tallies = contenders.map(newTally);
  const sequences = contenders.map(() => ({ value: 0 }));
  // Every contender first runs unmeasured long enough for the JIT to optimise its code: measured
  // from cold, a pipeline's first thousands of calls run in the interpreter and tilt the ratios.
  const warmupMs = options.warmupMs ?? 1000;
  for (const [i, contender] of contenders.entries()) {
    const sequence = sequences[i];
    if (sequence) await runFor(contender, warmupMs, sequence, newTally());
  }
  for (let round = 0; round < rounds; round++) {
    // ABBA: every other round runs the contenders in reverse, so none always follows the same neighbour.
    const order = [...contenders.entries()];
    if (round % 2 === 1) order.reverse();
    for (const [i, contender] of order) {
      const tally = tallies[i];
      const sequence = sequences[i];
      if (tally && sequence) await runFor(contender, sliceMs, sequence, tally);
    }
  }
  return contenders.map((contender, i) => {
    const tally = tallies[i] ?? newTally();
    const messages = tally.ops * (contender.perOp ?? 1);
    const result = summarize(
      contender.name,
      contender.concurrency,
      messages,
      tally.elapsedMs,
      tally.latencies,
    );
    return {
      ...result,
      ...(messages === 0 ? {} : { cpuMicrosPerMessage: Number((tally.cpuMicros / messages).toFixed(2)) }),
      ...(contender.note === undefined ? {} : { note: contender.note }),
      ...(contender.baseline === undefined ? {} : { baseline: contender.baseline }),
      ...(contender.peer === undefined ? {} : { peer: contender.peer }),
    };
  });
}

/** One result row: `messages` handled in `elapsedMs`, `latencies` in milliseconds (one per op or message). */
export function summarize(
  name: string,
  concurrency: number,
  messages: number,
  elapsedMs: number,
  latencies: readonly number[],
): BenchResult {
  const sorted = Float64Array.from(latencies).sort();
  return {
    name,
    concurrency,
    messagesPerSecond: Math.round((messages * 1000) / elapsedMs),
    p50Ms: Number(percentile(sorted, 50).toFixed(3)),
    p99Ms: Number(percentile(sorted, 99).toFixed(3)),
    messages,
  };
}

/**
 * Human table of a suite's results, with each row's ratio to its baseline at the same concurrency
 * (the raw driver doing the same work: `raw` unless the row names another, such as `raw:duplicates`),
 * and its speed-up over a peer library's row where it names one.
 */
export function formatTable(suite: string, results: readonly BenchResult[]): string {
  const rate = new Map(results.map((r) => [`${r.name}@${r.concurrency}`, r.messagesPerSecond]));
  const withPeer = results.some((r) => r.peer !== undefined);
  const withDrain = results.some((r) => r.peakRssMb !== undefined || r.ratios !== undefined);
  const cpu = new Map(results.map((r) => [`${r.name}@${r.concurrency}`, r.cpuMicrosPerMessage]));
  const withCpu = !withDrain && results.some((r) => r.cpuMicrosPerMessage !== undefined);
  const ms = (value: number | undefined): string => (value === undefined ? '' : value.toFixed(3));
  const rows = results.map((r) => {
    const baseline = r.baseline ?? 'raw';
    const base = rate.get(`${baseline}@${r.concurrency}`);
    const ratio =
      base === undefined || r.name === baseline || r.name.startsWith('raw')
        ? ''
        : `${((r.messagesPerSecond / base) * 100).toFixed(0)}% of ${baseline}`;
    const peer = r.peer === undefined ? undefined : rate.get(`${r.peer}@${r.concurrency}`);
    const speedUp = peer === undefined ? '' : `${(r.messagesPerSecond / peer).toFixed(2)}× ${r.peer ?? ''}`;
    const cells = [r.name, String(r.concurrency), String(r.messagesPerSecond), ms(r.p50Ms)];
    cells.push(ms(r.p99Ms), ratio, ...(withPeer ? [speedUp] : []));
    if (withCpu)
      cells.push(
        cpuCell(r.cpuMicrosPerMessage, ratio === '' ? undefined : cpu.get(`${baseline}@${r.concurrency}`)),
      );
    if (withDrain) cells.push(drainCells(r));
    cells.push(r.note ?? '');
    return cells;
  });
  const header = ['name', 'conc', 'msg/s', 'p50 ms', 'p99 ms', 'vs baseline'];
  header.push(
    ...(withPeer ? ['vs peer'] : []),
    ...(withCpu ? ['cpu µs/msg'] : []),
    ...(withDrain ? ['drains'] : []),
    'note',
  );
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [`suite ${suite}`, line(header), ...rows.map(line)].join('\n');
}

/**
 * A side-by-side row's CPU per message and, against its baseline's, the throughput share it implies
 * (baseline CPU / row CPU): the ratio a busy neighbour cannot tilt, for work that runs in process.
 */
function cpuCell(micros: number | undefined, baseline: number | undefined): string {
  if (micros === undefined) return '';
  const share = baseline === undefined ? '' : ` (${((baseline / micros) * 100).toFixed(0)}%)`;
  return `${micros.toFixed(2)}${share}`;
}

/** A drain row's extra figures: the ratio of each repetition, the publish rate, peak RSS. */
function drainCells(r: BenchResult): string {
  const parts: string[] = [];
  if (r.ratios !== undefined && r.ratios.length > 0)
    parts.push(`each ${r.ratios.map((x) => `${(x * 100).toFixed(0)}%`).join(' ')}`);
  if (r.cpuMicrosPerMessage !== undefined) parts.push(`cpu ${r.cpuMicrosPerMessage} µs/msg`);
  if (r.statementsPerMessage !== undefined) parts.push(`${r.statementsPerMessage} statements/msg`);
  if (r.mainThreadCpuMicrosPerMessage !== undefined)
    parts.push(`main ${r.mainThreadCpuMicrosPerMessage} + threads ${r.otherThreadsCpuMicrosPerMessage ?? 0}`);
  const others = Object.entries(r.otherProcessesCpuMicrosPerMessage ?? {}).slice(0, 3);
  if (others.length > 0)
    parts.push(`others ${others.map(([name, micros]) => `${name} ${micros}`).join(', ')}`);
  if (r.firstEffectMs !== undefined) parts.push(`first effect ${r.firstEffectMs} ms`);
  if (r.publishPerSecond !== undefined) parts.push(`publish ${r.publishPerSecond}/s`);
  if (r.peakRssMb !== undefined) parts.push(`rss ${r.peakRssMb} MiB (+${r.rssGrowthMb ?? 0})`);
  return parts.join(', ');
}
