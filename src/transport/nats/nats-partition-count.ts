import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import type { NatsSettings } from './nats-config.js';
import { orderingStream, orderingSubject } from './nats-names.js';

/** What the count record needs from the open transport. */
export interface CountParts {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly settings: NatsSettings;
}

/**
 * The partition count an ordered group recorded (the last entry of its subject in the ordering
 * stream), recording `count` when there is none yet. Two members starting at once both expect the
 * subject empty: one writes, the other reads what it wrote.
 */
export async function recordedPartitionCount(
  parts: CountParts,
  group: string,
  count: number,
): Promise<number> {
  const { settings } = parts;
  const subject = orderingSubject(settings, group);
  for (;;) {
    const recorded = await readCount(parts, subject);
    if (recorded !== null) return recorded;
    if (settings.topology === 'check') {
      throw new ConfigError(
        'topology',
        `ordered group '${group}' has no partition count recorded in ${orderingStream(settings)} (topology 'check' records nothing)`,
      );
    }
    try {
      await parts.js.publish(subject, String(count), {
        expect: { lastSubjectSequence: 0 },
        timeout: settings.requestTimeoutMs,
      });
      return count;
    } catch (error) {
      if (!/wrong last sequence/i.test(errorText(error))) throw unavailable(subject, error);
    }
  }
}

/** The refusal of a member whose count differs from the group's recorded one. */
export function partitionCountError(
  group: string,
  recorded: number,
  count: number,
  stream: string,
): ConfigError {
  return new ConfigError(
    'partitions',
    `group '${group}' is ordered over ${recorded} partitions (recorded in stream ${stream}), and this ` +
      `transport is configured with ${count}: a new count would move ordering keys between partitions. ` +
      `Configure ${recorded}; ordering.onPartitionChange 'drain' is not built on NATS yet, so a new count is ` +
      'set drained by hand (docs/transports/nats.md#per-key-ordering)',
  );
}

/** The partition count `group` recorded as an ordered group, or null when it is not one. */
export function readPartitionCount(
  parts: Pick<CountParts, 'jsm' | 'settings'>,
  group: string,
): Promise<number | null> {
  return readCount(parts, orderingSubject(parts.settings, group));
}

async function readCount(
  parts: Pick<CountParts, 'jsm' | 'settings'>,
  subject: string,
): Promise<number | null> {
  try {
    const message = await parts.jsm.streams.getMessage(orderingStream(parts.settings), {
      last_by_subj: subject,
    });
    return message === null ? null : Number(message.string());
  } catch (error) {
    const text = (error as Error).message;
    if (text.includes('no message found') || text.includes('stream not found')) return null;
    throw unavailable(subject, error);
  }
}

function unavailable(subject: string, error: unknown): TransportUnavailableError {
  return new TransportUnavailableError(`NATS: reading or writing ${subject} failed: ${errorText(error)}`, {
    cause: error,
  });
}
