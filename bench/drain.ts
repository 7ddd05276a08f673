/**
 * Drains: a row stores its messages at the broker first (confirmed, timed apart as its publish rate),
 * then consumes all of them, timed from the start of consuming until the last message had its effect.
 * Rows take turns in every repetition (the order alternates), so a noisy neighbour slows them alike,
 * and each repetition's ratio to the baseline is kept.
 */
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import type { BenchResult } from './harness.js';
import { cpuBetween, cpuSnapshot, type CpuSnapshot } from './proc-cpu.js';

/** One drain of one row: keys `<tag>-<n>` for n below `count`, fresh in every drain. */
export interface DrainRun {
  readonly tag: string;
  readonly count: number;
  /** Counts the messages done; `finished` resolves at `count`. */
  readonly progress: Countdown;
}

/** A row opened for its drains. */
export interface Drainer {
  /** Stores the run's messages at the broker; resolves once the broker confirmed every one. */
  publish(run: DrainRun): Promise<void>;
  /** Starts consuming the run's messages; the run's progress counts them. Resolves to the stopper. */
  consume(run: DrainRun): Promise<{ stop(): Promise<void> }>;
  /** Closes the clients and removes what the row created at the broker. */
  close(): Promise<void>;
}

export interface DrainContender {
  readonly name: string;
  readonly concurrency: number;
  /** The row this one is compared with (the raw client doing the same work). */
  readonly baseline?: string;
  readonly note?: string;
  open(): Promise<Drainer>;
}

/** Counts messages done until `count`; a failure ends the drain with its error. */
export class Countdown {
  readonly finished: Promise<void>;
  /** `performance.now()` of the first effect, `undefined` before it. */
  firstAt: number | undefined;
  #left: number;
  #resolve: () => void = () => undefined;
  #reject: (error: unknown) => void = () => undefined;

  constructor(count: number) {
    this.#left = count;
    this.finished = new Promise<void>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    if (count <= 0) this.#resolve();
  }

  /** `n` more messages had their effect (and their ack went out). */
  tick(n = 1): void {
    this.firstAt ??= performance.now();
    this.#left -= n;
    if (this.#left <= 0) this.#resolve();
  }

  fail(error: unknown): void {
    this.#reject(error);
  }
}

/** Samples the resident set size while a drain runs. */
class RssSampler {
  readonly start = process.memoryUsage.rss();
  peak = this.start;
  readonly #timer = setInterval(() => this.sample(), 20);

  sample(): void {
    this.peak = Math.max(this.peak, process.memoryUsage.rss());
  }

  stop(): void {
    clearInterval(this.#timer);
    this.sample();
  }
}

export interface DrainPlan {
  /** Messages per drain. */
  readonly messages: number;
  readonly repetitions: number;
  /** The business effects counted in the database (points credited ÷ 100): each drain must add `messages`. */
  readonly effects: () => Promise<number>;
  /** Prefix of every tag, unique to this run. */
  readonly runId: string;
  /**
   * A directory: each drain's consuming side is CPU-profiled on its own, written as
   * `<row>-r<repetition>.cpuprofile` (publishing and the checks are left out).
   */
  readonly profileDir?: string;
  /**
   * Messages of one untimed drain of every row before the repetitions (0: none), so that no row's
   * figures carry the JIT compiling its code: the oncemq rows run far more code than the raw ones,
   * and on a 2-core machine compiling it took a third of a first 5,000-message drain's CPU.
   */
  readonly warmup?: number;
}

/** The V8 CPU profiler of this process, started and stopped around one drain's consuming. */
class ConsumeProfiler {
  readonly #session = new Session();

  static async open(dir: string | undefined): Promise<ConsumeProfiler | undefined> {
    if (dir === undefined) return undefined;
    const profiler = new ConsumeProfiler();
    profiler.#session.connect();
    await profiler.#session.post('Profiler.enable');
    await profiler.#session.post('Profiler.setSamplingInterval', { interval: 250 });
    return profiler;
  }

  start(): Promise<void> {
    return this.#session.post('Profiler.start');
  }

  async stop(file: string): Promise<void> {
    const { profile } = await this.#session.post('Profiler.stop');
    await writeFile(file, JSON.stringify(profile));
  }

  close(): void {
    this.#session.disconnect();
  }
}

interface Tally {
  consumeMs: number;
  /** Summed over the drains: from subscribing to the first effect (joining, first fetch). */
  firstEffectMs: number;
  drains: number;
  cpuMicros: number;
  /** Where the CPU went, from /proc, summed over the drains (undefined without /proc). */
  where: { main: number; helpers: number; others: Map<string, number> } | undefined;
  publishMs: number;
  messages: number;
  peak: number;
  growth: number;
  rates: number[];
}

const MIB = 1024 * 1024;

function addWhere(tally: Tally, before: CpuSnapshot | undefined, after: CpuSnapshot | undefined): void {
  if (before === undefined || after === undefined || tally.where === undefined) {
    tally.where = undefined;
    return;
  }
  const used = cpuBetween(before, after);
  tally.where.main += used.main;
  tally.where.helpers += used.helpers;
  for (const [name, micros] of used.others)
    tally.where.others.set(name, (tally.where.others.get(name) ?? 0) + micros);
}

/** Other processes below this many microseconds per message are left out of `otherProcessesCpuMicrosPerMessage`. */
const OTHERS_FLOOR = 1;

function whereFields(t: Tally): Partial<BenchResult> {
  if (t.where === undefined || t.messages === 0) return {};
  const per = (micros: number): number => Math.round(micros / t.messages);
  const others = [...t.where.others]
    .map(([name, micros]) => [name, per(micros)] as const)
    .filter(([, micros]) => micros >= OTHERS_FLOOR)
    .sort((a, b) => b[1] - a[1]);
  return {
    mainThreadCpuMicrosPerMessage: per(t.where.main),
    otherThreadsCpuMicrosPerMessage: per(t.where.helpers),
    otherProcessesCpuMicrosPerMessage: Object.fromEntries(others),
  };
}

/** One drain of `count` messages: publish, then consume until done, check the effects, stop. */
async function drainOnce(
  drainer: Drainer,
  tag: string,
  count: number,
  plan: DrainPlan,
  tally: Tally,
  name: string,
  profiler?: ConsumeProfiler,
): Promise<void> {
  const run: DrainRun = { tag, count, progress: new Countdown(count) };
  const p0 = performance.now();
  await drainer.publish(run);
  tally.publishMs += performance.now() - p0;
  const before = await plan.effects();
  await profiler?.start();
  const rss = new RssSampler();
  const where = cpuSnapshot();
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const consumer = await drainer.consume(run);
  try {
    await run.progress.finished;
  } finally {
    const elapsed = performance.now() - t0;
    const used = process.cpuUsage(cpu);
    tally.cpuMicros += used.user + used.system;
    addWhere(tally, where, cpuSnapshot());
    rss.stop();
    tally.consumeMs += elapsed;
    tally.firstEffectMs += (run.progress.firstAt ?? t0 + elapsed) - t0;
    tally.drains++;
    tally.rates.push((count * 1000) / elapsed);
    tally.peak = Math.max(tally.peak, rss.peak);
    tally.growth = Math.max(tally.growth, rss.peak - rss.start);
    if (profiler !== undefined && plan.profileDir !== undefined) {
      await profiler.stop(join(plan.profileDir, `${tag}.cpuprofile`));
    }
    await consumer.stop();
  }
  tally.messages += count;
  const added = (await plan.effects()) - before;
  if (added !== count) {
    throw new Error(`${name}: ${count} messages drained but ${added} effects were applied`);
  }
}

/** Drains every contender `repetitions` times, taking turns (ABBA), and reports one row each. */
export async function measureDrains(
  contenders: readonly DrainContender[],
  plan: DrainPlan,
): Promise<BenchResult[]> {
  const newTally = (): Tally => ({
    consumeMs: 0,
    firstEffectMs: 0,
    drains: 0,
    cpuMicros: 0,
    where: { main: 0, helpers: 0, others: new Map() },
    publishMs: 0,
    messages: 0,
    peak: 0,
    growth: 0,
    rates: [],
  });
  const tallies = contenders.map(newTally);
  const warmups = contenders.map(newTally);
  const drainers: Drainer[] = [];
  const profiler = await ConsumeProfiler.open(plan.profileDir);
  try {
    for (const contender of contenders) drainers.push(await contender.open());
    if ((plan.warmup ?? 0) > 0) {
      for (const [i, contender] of contenders.entries()) {
        const tag = `${plan.runId}-${contender.name.replace(/[^A-Za-z0-9]/g, '_')}-w`;
        const tally = warmups[i] as Tally;
        await drainOnce(drainers[i] as Drainer, tag, plan.warmup ?? 0, plan, tally, contender.name);
      }
    }
    for (let rep = 0; rep < plan.repetitions; rep++) {
      const order = [...contenders.keys()];
      if (rep % 2 === 1) order.reverse();
      for (const i of order) {
        const contender = contenders[i] as DrainContender;
        const tag = `${plan.runId}-${contender.name.replace(/[^A-Za-z0-9]/g, '_')}-r${rep}`;
        const tally = tallies[i] as Tally;
        await drainOnce(drainers[i] as Drainer, tag, plan.messages, plan, tally, contender.name, profiler);
      }
    }
  } finally {
    profiler?.close();
    for (const drainer of drainers) await drainer.close();
  }
  const rates = new Map(
    contenders.map((c, i) => {
      const t = tallies[i] as Tally;
      return [c.name, { all: (t.messages * 1000) / t.consumeMs, each: t.rates }];
    }),
  );
  return contenders.map((contender, i) => {
    const t = tallies[i] as Tally;
    const own = rates.get(contender.name);
    const base = contender.baseline === undefined ? undefined : rates.get(contender.baseline);
    const round = (x: number): number => Number(x.toFixed(3));
    return {
      name: contender.name,
      concurrency: contender.concurrency,
      messagesPerSecond: Math.round(own?.all ?? 0),
      messages: t.messages,
      warmupMessages: (warmups[i] as Tally).messages,
      repetitions: plan.repetitions,
      publishPerSecond: Math.round((t.messages * 1000) / t.publishMs),
      cpuMicrosPerMessage: Math.round(t.cpuMicros / t.messages),
      firstEffectMs: Math.round(t.firstEffectMs / Math.max(1, t.drains)),
      ...whereFields(t),
      peakRssMb: Math.round(t.peak / MIB),
      rssGrowthMb: Math.round(t.growth / MIB),
      ...(contender.baseline === undefined ? {} : { baseline: contender.baseline }),
      ...(base === undefined || own === undefined
        ? {}
        : {
            ratio: round(own.all / base.all),
            ratios: own.each.map((rate, rep) => round(rate / (base.each[rep] ?? rate))),
          }),
      ...(contender.note === undefined ? {} : { note: contender.note }),
    };
  });
}
