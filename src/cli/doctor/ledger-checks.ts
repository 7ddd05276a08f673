import { statfs } from 'node:fs/promises';
import { formatDuration } from '../../core/duration.js';
import { errorText } from '../../core/errors.js';
import type { DoctorSettings, Finding } from './findings.js';

/**
 * The judgements of the ledger checks of `oncemq doctor`, apart from how each database is read:
 * every function here takes figures already read and answers a finding.
 */

/** A skew of this much is worth a warning when no lease is given (transactional mode). */
export const CLOCK_WARN_WITHOUT_LEASE_MS = 5_000;
/** With a lease: warn at this share of it… */
export const CLOCK_WARN_LEASE_SHARE = 0.1;
/** …and fail at this share: two hosts skewed the opposite way by half a lease each eat a whole lease. */
export const CLOCK_FAIL_LEASE_SHARE = 0.5;
/** `ledger.size` warns when the disk fills up within this many days at the last day's growth. */
export const DISK_WARN_DAYS = 14;

const DAY_MS = 86_400_000;

/** `ledger.retention`: the retention the finished rows are kept for against the redelivery horizon. */
export function retentionFinding(
  settings: DoctorSettings,
  ledgerDefaultMs: number,
  what = 'ledger retention',
): Finding {
  const retentionMs = settings.retentionMs ?? ledgerDefaultMs;
  const source = settings.retentionMs === undefined ? `default ${what}` : what;
  const horizonMs = settings.retry.horizonMs + settings.replayMarginMs;
  const detail = {
    retentionMs,
    retentionGiven: settings.retentionMs !== undefined,
    retryPolicy: settings.retry.name,
    retryHorizonMs: settings.retry.horizonMs,
    replayMarginMs: settings.replayMarginMs,
    redeliveryHorizonMs: horizonMs,
  };
  const figures =
    `${source} ${formatDuration(retentionMs)} vs redelivery horizon ${formatDuration(horizonMs)} ` +
    `(${settings.retry.name} retries ${formatDuration(settings.retry.horizonMs)} + replay margin ${formatDuration(settings.replayMarginMs)})`;
  if (retentionMs < horizonMs) {
    return {
      check: 'ledger.retention',
      status: 'fail',
      summary: `${figures}: a key is forgotten while a copy of its message can still arrive, and that copy runs again`,
      fix: `keep finished rows at least ${formatDuration(horizonMs)} (startRetention's olderThan, the ledger's retention), or shorten the retry schedule or the replay margin`,
      detail,
    };
  }
  return { check: 'ledger.retention', status: 'ok', summary: figures, detail };
}

/** What one reading of the database's clock found. */
export interface ClockReading {
  /** The database's clock minus this process's, at the middle of the round trip. */
  readonly skewMs: number;
  /** The round trip of the reading; the skew is known to within half of it. */
  readonly roundTripMs: number;
}

/**
 * Reads the database's clock between two readings of `clock` (this process's clock, a parameter so
 * that a test can shift it) and answers the skew at the middle of the round trip.
 */
export async function readSkew(
  serverNowMs: () => Promise<number>,
  clock: () => number,
): Promise<ClockReading> {
  const before = clock();
  const server = await serverNowMs();
  const after = clock();
  return { skewMs: server - (before + after) / 2, roundTripMs: Math.max(0, after - before) };
}

/**
 * `ledger.clock`: leases are stamped with the application's clock, so every host must agree with the
 * others well within a lease; the database's clock is the reference all of them are compared with.
 * Only the part of the skew beyond the reading's uncertainty (half the round trip) counts.
 */
export function clockFinding(reading: ClockReading, leaseMs: number | undefined, server: string): Finding {
  const certainMs = Math.max(0, Math.abs(reading.skewMs) - reading.roundTripMs / 2);
  const warnMs = leaseMs === undefined ? CLOCK_WARN_WITHOUT_LEASE_MS : leaseMs * CLOCK_WARN_LEASE_SHARE;
  const failMs = leaseMs === undefined ? undefined : leaseMs * CLOCK_FAIL_LEASE_SHARE;
  const direction = reading.skewMs >= 0 ? 'behind' : 'ahead of';
  const summary =
    `this host's clock is ${formatDuration(Math.round(Math.abs(reading.skewMs)))} ${direction} ${server}'s ` +
    `(±${formatDuration(Math.round(reading.roundTripMs / 2))})` +
    (leaseMs === undefined ? '' : `, lease ${formatDuration(leaseMs)}`);
  const detail = { ...reading, leaseMs: leaseMs ?? null, warnMs, failMs: failMs ?? null };
  const fix =
    'run NTP (chrony, systemd-timesyncd) on every host of the group and on the database host; leases are stamped with each host’s own clock';
  if (failMs !== undefined && certainMs >= failMs) {
    return {
      check: 'ledger.clock',
      status: 'fail',
      summary: `${summary}: a skew of half a lease lets two hosts skewed apart hold one key at once`,
      fix,
      detail,
    };
  }
  if (certainMs >= warnMs) return { check: 'ledger.clock', status: 'warn', summary, fix, detail };
  return { check: 'ledger.clock', status: 'ok', summary, detail };
}

/** What `ledger.size` reads from a ledger. */
export interface LedgerSize {
  readonly rows: number;
  /** `rows` is the database's estimate (the table is past {@link EXACT_COUNT_BYTES}), not a count. */
  readonly rowsEstimated?: boolean;
  /** Table and index bytes (undefined when the database cannot tell). */
  readonly bytes?: number | undefined;
  /** `server`: `bytes` is what the whole server uses (Redis), so there is no size per row. @default 'table' */
  readonly bytesOf?: 'table' | 'server';
  /**
   * Rows written in the last day and hour (undefined when the ledger keeps no such time): created or
   * updated, read on the (status, updated_at) index where the ledger has one, by created_at otherwise.
   */
  readonly rowsLastDay?: number | undefined;
  readonly rowsLastHour?: number | undefined;
  /** The disk that holds the data, or why it cannot be known. */
  readonly disk: DiskSpace | { readonly unknown: string };
}

export interface DiskSpace {
  readonly path: string;
  readonly freeBytes: number;
  readonly totalBytes: number;
}

/** The host of a connection URL, or undefined when it is not a URL (a Unix socket path). */
export function urlHost(url: string): string | undefined {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
}

/**
 * The bound on a quiet transaction (`postgres.idle-timeout`, `mysql.idle-timeout`): unset, a claim
 * transaction of a host cut off the network keeps its row locks and stalls every other host's claims
 * of those keys (docs/chaos.md).
 */
export function idleTimeoutFinding(
  check: string,
  setting: string,
  value: string,
  set: boolean,
  fix: string,
): Finding {
  const detail = { [setting]: value };
  if (set) {
    return {
      check,
      status: 'ok',
      summary: `${setting} is ${value}: a cut-off host's claim transactions end after it`,
      detail,
    };
  }
  return {
    check,
    status: 'warn',
    summary: `${setting} is unset: the claim transactions of a host cut off the network keep their row locks until TCP keepalive gives up (about 2 h), and every other host’s claims of those keys wait on them (docs/chaos.md)`,
    fix,
    detail,
  };
}

/** The host names that mean "this machine". */
export function isLoopback(host: string | undefined): boolean {
  if (host === undefined || host === '') return true; // a Unix socket
  return /^(localhost|127(\.\d+){3}|\[?::1\]?)$/i.test(host);
}

/**
 * The free space of the disk that holds `dir` on a database of `host`: known only when the database
 * runs on this machine and this process may read the directory.
 */
export async function diskOf(host: string | undefined, dir: string | undefined): Promise<LedgerSize['disk']> {
  if (!isLoopback(host)) return { unknown: `the database runs on ${host ?? '?'}, not on this host` };
  if (dir === undefined || dir === '') return { unknown: 'the database does not tell its data directory' };
  try {
    const stats = await statfs(dir);
    return { path: dir, freeBytes: stats.bavail * stats.bsize, totalBytes: stats.blocks * stats.bsize };
  } catch (error) {
    return { unknown: `cannot read the data directory ${dir}: ${errorText(error)}` };
  }
}

const mib = (bytes: number): string => `${(bytes / 1_048_576).toFixed(1)} MiB`;

/** `ledger.size`: rows, bytes, growth, and the days until the disk is full at the last day's growth. */
export function sizeFinding(size: LedgerSize): Finding {
  const server = size.bytesOf === 'server';
  const bytesPerRow =
    size.bytes !== undefined && size.rows > 0 && !server ? size.bytes / size.rows : undefined;
  const growthBytesPerDay =
    bytesPerRow !== undefined && size.rowsLastDay !== undefined ? bytesPerRow * size.rowsLastDay : undefined;
  const disk = 'unknown' in size.disk ? undefined : size.disk;
  const daysUntilFull =
    disk !== undefined && growthBytesPerDay !== undefined && growthBytesPerDay > 0
      ? disk.freeBytes / growthBytesPerDay
      : undefined;
  const parts = [
    `${size.rowsEstimated === true ? 'about ' : ''}${size.rows} rows`,
    size.bytes === undefined
      ? undefined
      : `${mib(size.bytes)} ${server ? 'used by the server' : 'with indexes'}`,
    bytesPerRow === undefined ? undefined : `${Math.round(bytesPerRow)} B/row`,
    size.rowsLastDay === undefined
      ? undefined
      : `${size.rowsLastDay} written in 24h, ${size.rowsLastHour ?? 0} in 1h`,
    disk === undefined
      ? `disk free unknown (${(size.disk as { unknown: string }).unknown})`
      : `${mib(disk.freeBytes)} free of ${disk.path}`,
    daysUntilFull === undefined ? undefined : `full in ${daysUntilFull.toFixed(1)} days at this growth`,
  ];
  const detail = {
    ...size,
    bytesPerRow: bytesPerRow ?? null,
    growthBytesPerDay,
    daysUntilFull: daysUntilFull ?? null,
  };
  const summary = parts.filter((part) => part !== undefined).join(', ');
  if (daysUntilFull !== undefined && daysUntilFull < DISK_WARN_DAYS) {
    return {
      check: 'ledger.size',
      status: 'warn',
      summary,
      fix: `free or add disk space, or shorten the retention (finished rows older than it are purged): at this growth the disk fills within ${DISK_WARN_DAYS} days`,
      detail,
    };
  }
  return { check: 'ledger.size', status: 'ok', summary, detail };
}

/** `ledger.stuck`: PROCESSING rows whose lease ended, left by an owner that died or hangs. */
export function stuckFinding(count: number, group: string | undefined, fixCommand: string): Finding {
  const where = group === undefined ? '' : ` in group ${group}`;
  if (count === 0) {
    return { check: 'ledger.stuck', status: 'ok', summary: `no stuck claims${where}`, detail: { stuck: 0 } };
  }
  return {
    check: 'ledger.stuck',
    status: 'warn',
    summary: `${count} PROCESSING row(s)${where} whose lease ended: their owner died or hangs, and their keys wait for a redelivery to reclaim them`,
    fix: `list them with \`${fixCommand}\`; a redelivery reclaims each, \`oncemq ledger reset KEY --group G\` releases one now`,
    detail: { stuck: count },
  };
}

/** A check that could not run, with why. */
export function skipped(check: string, why: string): Finding {
  return { check, status: 'skip', summary: why };
}

/**
 * Past this many bytes of table and indexes the size check reports the database's row estimate
 * (PostgreSQL `reltuples`, InnoDB `TABLE_ROWS`) instead of counting: a count reads the whole table.
 */
export const EXACT_COUNT_BYTES = 256 * 1_048_576;

/** Days in milliseconds, for growth windows. */
export const GROWTH_WINDOWS = Object.freeze({ dayMs: DAY_MS, hourMs: 3_600_000 });
