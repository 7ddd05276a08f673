import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import type { NatsSettings } from './nats-config.js';
import type { NatsDriver } from './nats-driver.js';
import { orderingStream, orderingSubject } from './nats-names.js';

/** Header of a count record written by a drain: the count the group is moving from. */
export const DRAIN_FROM_HEADER = 'oncemq-drain-from';
/**
 * Header of a count record written by a drain: for each topic stream, the last sequence at the switch
 * (JSON, `{ "ONCEMQ_orders": 42 }`). The old count's consumers run what is at or below it; the new
 * count's consumers start after it.
 */
export const DRAIN_BOUNDS_HEADER = 'oncemq-drain-bounds';

/** What the count record needs from the open transport. */
export interface CountParts {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly settings: NatsSettings;
}

/** A group moving from one partition count to another (`ordering.onPartitionChange: 'drain'`). */
export interface PartitionDrain {
  /** The count the group is moving from. */
  readonly from: number;
  /** For each topic stream, its last sequence when the drain was recorded. */
  readonly bounds: Readonly<Record<string, number>>;
}

/**
 * The last entry of a group's subject in the ordering stream: its partition count and, while a
 * drain runs, the count it moves from. The body is the count alone, so a reader that knows no
 * drains reads the new count (and refuses a member configured with the old one).
 */
export interface OrderingRecord {
  readonly count: number;
  /** The entry's sequence in the ordering stream: the next write expects it. */
  readonly seq: number;
  readonly drain?: PartitionDrain;
}

/**
 * The record of an ordered group, writing one with `count` when there is none yet. Two members
 * starting at once both expect the subject empty: one writes, the other reads what it wrote.
 */
export async function orderingRecord(
  parts: CountParts,
  group: string,
  count: number,
): Promise<OrderingRecord> {
  const { settings } = parts;
  const subject = orderingSubject(settings, group);
  for (;;) {
    const recorded = await readOrderingRecord(parts, group);
    if (recorded !== null) return recorded;
    if (settings.topology === 'check') {
      throw new ConfigError(
        'topology',
        `ordered group '${group}' has no partition count recorded in ${orderingStream(settings)} (topology 'check' records nothing)`,
      );
    }
    const seq = await writeRecord(parts, subject, count, 0, undefined);
    if (seq !== null) return { count, seq };
  }
}

/**
 * Records a drain of `group` from `record`'s count to `count`: the new count with the old one and
 * each topic stream's last sequence. It expects `record` to be the last entry, so of members racing
 * to switch, one succeeds; null when another entry came first (read the record again).
 */
export async function recordDrain(
  parts: CountParts & { readonly driver: NatsDriver },
  group: string,
  record: OrderingRecord,
  count: number,
  bounds: Readonly<Record<string, number>>,
): Promise<OrderingRecord | null> {
  const drain = { from: record.count, bounds };
  const seq = await writeRecord(parts, orderingSubject(parts.settings, group), count, record.seq, {
    driver: parts.driver,
    drain,
  });
  return seq === null ? null : { count, seq, drain };
}

/** Records that the drain in `record` is finished; false when another entry came first. */
export async function recordDrainDone(
  parts: CountParts,
  group: string,
  record: OrderingRecord,
): Promise<boolean> {
  const seq = await writeRecord(
    parts,
    orderingSubject(parts.settings, group),
    record.count,
    record.seq,
    undefined,
  );
  return seq !== null;
}

/** The refusal of a member that finds a drain in progress that it cannot join. */
export function drainInProgressError(
  group: string,
  record: OrderingRecord & { readonly drain: PartitionDrain },
  count: number,
  stream: string,
): ConfigError {
  const { from } = record.drain;
  return new ConfigError(
    'partitions',
    `group '${group}' is moving from ${from} to ${record.count} partitions (a drain recorded in stream ` +
      `${stream}), and this transport is configured with ${count}: ` +
      (count === from
        ? `the ${from} partitions are drained and then deleted. Configure ${record.count}`
        : `configure ${record.count}, or start again once the drain is finished`),
  );
}

/** The partition count `group` recorded as an ordered group, or null when it is not one. */
export async function readPartitionCount(
  parts: Pick<CountParts, 'jsm' | 'settings'>,
  group: string,
): Promise<number | null> {
  return (await readOrderingRecord(parts, group))?.count ?? null;
}

/** The last entry of `group`'s subject in the ordering stream, or null when there is none. */
export async function readOrderingRecord(
  parts: Pick<CountParts, 'jsm' | 'settings'>,
  group: string,
): Promise<OrderingRecord | null> {
  const subject = orderingSubject(parts.settings, group);
  try {
    const message = await parts.jsm.streams.getMessage(orderingStream(parts.settings), {
      last_by_subj: subject,
    });
    if (message === null) return null;
    const count = Number(message.string());
    const from = message.header.get(DRAIN_FROM_HEADER);
    if (from === '') return { count, seq: message.seq };
    const bounds = JSON.parse(message.header.get(DRAIN_BOUNDS_HEADER)) as Record<string, number>;
    return { count, seq: message.seq, drain: { from: Number(from), bounds } };
  } catch (error) {
    const text = (error as Error).message;
    if (text.includes('no message found') || text.includes('stream not found')) return null;
    throw unavailable(subject, error);
  }
}

/** Writes `count` expecting `after` as the subject's last sequence; null when another entry came first. */
async function writeRecord(
  parts: CountParts,
  subject: string,
  count: number,
  after: number,
  drain: { readonly driver: NatsDriver; readonly drain: PartitionDrain } | undefined,
): Promise<number | null> {
  let headers;
  if (drain !== undefined) {
    headers = drain.driver.headers();
    headers.set(DRAIN_FROM_HEADER, String(drain.drain.from));
    headers.set(DRAIN_BOUNDS_HEADER, JSON.stringify(drain.drain.bounds));
  }
  try {
    const ack = await parts.js.publish(subject, String(count), {
      ...(headers === undefined ? {} : { headers }),
      expect: { lastSubjectSequence: after },
      timeout: parts.settings.requestTimeoutMs,
    });
    return ack.seq;
  } catch (error) {
    if (/wrong last sequence/i.test(errorText(error))) return null;
    throw unavailable(subject, error);
  }
}

function unavailable(subject: string, error: unknown): TransportUnavailableError {
  return new TransportUnavailableError(`NATS: reading or writing ${subject} failed: ${errorText(error)}`, {
    cause: error,
  });
}
