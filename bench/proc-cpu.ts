/**
 * Where a drain's CPU went, read from Linux's /proc: this process's main thread apart from its other
 * threads (V8's garbage collector and compiler, libuv's pool), and every other process of the machine
 * by command name (the database, the broker, and any neighbour). The kernel counts in clock ticks of
 * 10 ms, so the figures are summed over whole drains. Elsewhere than Linux there is nothing to read.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Linux's USER_HZ: the unit of the times in /proc/<pid>/stat, 100 on every architecture Node runs on. */
const TICK_MICROS = 10_000;

export interface CpuSnapshot {
  /** This process's main thread, in microseconds. */
  readonly main: number;
  /** This process's other threads. */
  readonly helpers: number;
  /** Every other process, by command name. */
  readonly others: ReadonlyMap<string, number>;
}

/** The command name and the user + system time of a `stat` line (the name may hold spaces and parentheses). */
function parseStat(line: string): { name: string; micros: number } | undefined {
  const open = line.indexOf('(');
  const close = line.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  // After the name: state (field 3) …, utime is field 14 and stime field 15.
  const fields = line.slice(close + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isFinite(ticks)
    ? { name: line.slice(open + 1, close), micros: ticks * TICK_MICROS }
    : undefined;
}

function readStat(path: string): { name: string; micros: number } | undefined {
  try {
    return parseStat(readFileSync(path, 'utf8'));
  } catch {
    return undefined; // the process or thread ended meanwhile
  }
}

/** The CPU used so far by this process's threads and by every other process; `undefined` without /proc. */
export function cpuSnapshot(): CpuSnapshot | undefined {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  const self = String(process.pid);
  let main = 0;
  let helpers = 0;
  for (const tid of readdirSync(`/proc/${self}/task`)) {
    const stat = readStat(`/proc/${self}/task/${tid}/stat`);
    if (stat === undefined) continue;
    if (tid === self) main += stat.micros;
    else helpers += stat.micros;
  }
  const others = new Map<string, number>();
  for (const pid of pids) {
    if (pid === self) continue;
    const stat = readStat(`/proc/${pid}/stat`);
    if (stat === undefined) continue;
    // Kernel threads by kind: `kworker/1:2-mm_percpu_wq` counts as `kworker`.
    const name = stat.name.replace(/\/.*$/, '');
    others.set(name, (others.get(name) ?? 0) + stat.micros);
  }
  return { main, helpers, others };
}

/** What was used between two snapshots (processes that started meanwhile count from zero). */
export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): CpuSnapshot {
  const others = new Map<string, number>();
  for (const [name, micros] of after.others) {
    const used = micros - (before.others.get(name) ?? 0);
    if (used > 0) others.set(name, used);
  }
  return { main: after.main - before.main, helpers: after.helpers - before.helpers, others };
}
