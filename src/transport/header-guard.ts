import { DELIVERY_COUNT_HEADER, MAX_DELIVERY_COUNT, type Envelope } from '../core/envelope.js';
import { PermanentError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { MAX_RETRY_DELAY_MS, unprocessedBase, type DeadOutcome, type Outcome } from '../core/outcome.js';
import type { Processor } from './transport.js';

/**
 * Reason of a dead letter whose `oncemq-*` header (or stream field) holds a value oncemq's own
 * transport never writes there: a producer that is not oncemq's set it. The message's own fault.
 */
export const INVALID_HEADER_REASON = 'invalid-header';

/** An `oncemq-*` header a transport reads with a value out of the bounds it writes itself. */
export interface HeaderFault {
  /** The header's name. */
  readonly header: string;
  /** The value it carried, as text. */
  readonly value: string;
  /** What is wrong with it, completing "header 'x' = 'v' …". */
  readonly why: string;
}

/** Tells the fault of a delivery's headers, if any; the transport supplies the checks it needs. */
export type HeaderCheck = (envelope: Envelope) => HeaderFault | undefined;

/** Longest part of a header's value quoted in a dead letter's error. */
const QUOTED_CHARS = 100;

/** The error of an `invalid-header` dead letter: a {@link PermanentError} naming the header and its value. */
export function invalidHeaderError(fault: HeaderFault): PermanentError {
  const quoted = fault.value.length > QUOTED_CHARS ? `${fault.value.slice(0, QUOTED_CHARS)}…` : fault.value;
  return new PermanentError(
    INVALID_HEADER_REASON,
    `header '${fault.header}' = ${JSON.stringify(quoted)} ${fault.why}; oncemq's transport never writes ` +
      'that, so a producer that is not oncemq set it',
  );
}

/**
 * `oncemq-delivery-count`, which transports write on a retry copy: absent (a first delivery), or a
 * whole number from 1 to {@link MAX_DELIVERY_COUNT} in decimal digits, as the transports write it.
 */
export function checkDeliveryCount(headers: Readonly<Record<string, string>>): HeaderFault | undefined {
  const value = headers[DELIVERY_COUNT_HEADER];
  if (value === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(value))
    return { header: DELIVERY_COUNT_HEADER, value, why: 'is not a whole number >= 1 in decimal digits' };
  if (Number(value) > MAX_DELIVERY_COUNT)
    return {
      header: DELIVERY_COUNT_HEADER,
      value,
      why: `is more than ${MAX_DELIVERY_COUNT}, the most attempts a retry policy can make`,
    };
  return undefined;
}

/**
 * A topic that a copy names for itself (a retry copy's topic header or field) must be one of the
 * subscription's topics: a copy in a group's queue or retry stream of another topic was never stored
 * there by oncemq.
 */
export function checkNamedTopic(
  header: string,
  value: string | undefined,
  topics: readonly string[],
): HeaderFault | undefined {
  if (value === undefined || topics.includes(value)) return undefined;
  return { header, value, why: `names a topic this group does not subscribe to (${topics.join(', ')})` };
}

/**
 * How much later than now plus {@link MAX_RETRY_DELAY_MS} a retry copy's due time may be: the clocks of
 * the member that wrote it and the member that reads it may differ by this much.
 */
export const RETRY_DUE_MARGIN_MS = 5 * 60_000;

/**
 * A retry copy's due time as transports write it: epoch milliseconds in decimal digits, no later than
 * now + {@link MAX_RETRY_DELAY_MS} + {@link RETRY_DUE_MARGIN_MS}. A past due time is due now.
 */
export function checkRetryDue(
  header: string,
  value: string | undefined,
  now = Date.now(),
): HeaderFault | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,16}$/.test(value)) return { header, value, why: 'is not a time in epoch milliseconds' };
  const latest = now + MAX_RETRY_DELAY_MS + RETRY_DUE_MARGIN_MS;
  if (Number(value) > latest)
    return {
      header,
      value,
      why: `is later than any retry is scheduled (now + 7d + 5m = ${new Date(latest).toISOString()})`,
    };
  return undefined;
}

/** The first fault any of `checks` finds. */
export function firstFault(envelope: Envelope, checks: readonly HeaderCheck[]): HeaderFault | undefined {
  for (const check of checks) {
    const fault = check(envelope);
    if (fault !== undefined) return fault;
  }
  return undefined;
}

/**
 * Wraps a subscription's processor: a delivery whose headers `check` finds at fault is not processed
 * but answered with an `invalid-header` dead-letter outcome (the message's own fault, the header and
 * its value in the error), which the transport settles like any other dead letter. Neither a loop nor
 * a header read as an instruction it never was.
 */
export function guardHeaders(
  processor: Processor,
  group: string,
  check: HeaderCheck,
  logger: Logger,
): Processor {
  const refuse = (envelope: Envelope): DeadOutcome | undefined => {
    const fault = check(envelope);
    if (fault === undefined) return undefined;
    const error = invalidHeaderError(fault);
    logger.warn('oncemq: a delivery with an invalid oncemq header is dead-lettered unprocessed', {
      group,
      brokerId: envelope.brokerId,
      header: fault.header,
      error: error.message,
    });
    return {
      ...unprocessedBase(envelope),
      group,
      kind: 'dead',
      action: 'dead-letter',
      reason: INVALID_HEADER_REASON,
      error,
    };
  };
  const process = (envelope: Envelope): Promise<Outcome> =>
    Promise.resolve(refuse(envelope) ?? processor.process(envelope));
  const processBatch = processor.processBatch?.bind(processor);
  if (processBatch === undefined) return { process };
  return {
    process,
    async processBatch(envelopes: readonly Envelope[]): Promise<readonly Outcome[]> {
      const refused = envelopes.map(refuse);
      const good = envelopes.filter((_, index) => refused[index] === undefined);
      if (good.length === envelopes.length) return processBatch(envelopes);
      const answers =
        good.length === 0
          ? []
          : good.length === 1
            ? [await processor.process(good[0] as Envelope)]
            : await processBatch(good);
      let next = 0;
      return refused.map((outcome) => outcome ?? (answers[next++] as Outcome));
    },
  };
}
