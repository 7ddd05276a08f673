import type { Envelope } from '../../core/envelope.js';
import { ConfigError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { unprocessedBase, type Outcome } from '../../core/outcome.js';
import type { OrderingRecord } from './nats-partition-count.js';

/**
 * What an ordered member on one partition count makes of the group's count record, read every third
 * of a lease: while the group drains this count, the messages after the switch's bound of their
 * stream are not this member's (it acks them unprocessed); once the record names another count
 * without draining this one, the member stops, with the reason in `failure`.
 */
export class CountWatch {
  readonly #group: string;
  readonly #count: number;
  readonly #drainsTo: number | undefined;
  readonly #logger: Logger;
  /** While the group drains this count: each topic stream's last sequence at the switch. */
  #bounds: Readonly<Record<string, number>> | undefined;
  /** Why the member stopped by itself: the group moved to another partition count. */
  failure: Error | undefined;

  /** `drainsTo`: set on a drain's old count in a member on the new one, whose end is expected, not a failure. */
  constructor(group: string, count: number, drainsTo: number | undefined, logger: Logger) {
    this.#group = group;
    this.#count = count;
    this.#drainsTo = drainsTo;
    this.#logger = logger;
  }

  /** Follows the record as just read; false when the member must stop. */
  follow(record: OrderingRecord | null): boolean {
    const count = this.#count;
    if (record === null || (record.count === count && record.drain === undefined)) {
      this.#bounds = undefined;
      return true;
    }
    if (record.drain?.from === count) {
      if (this.#bounds === undefined) {
        this.#logger.info(
          'oncemq: the NATS ordered group is moving to another partition count; this member runs what came before the switch',
          { group: this.#group, from: count, to: record.count, bounds: record.drain.bounds },
        );
      }
      this.#bounds = record.drain.bounds;
      return true;
    }
    if (record.count === count) {
      this.#bounds = undefined;
      return true;
    }
    this.failure = new ConfigError(
      'partitions',
      `group '${this.#group}' moved from ${count} to ${record.count} partitions; this member, configured ` +
        `with ${count}, stopped. Configure ${record.count}`,
    );
    if (this.#drainsTo === record.count) {
      this.#logger.info('oncemq: the drain is finished; this member stops consuming the old partitions', {
        group: this.#group,
        from: count,
        to: record.count,
      });
    } else {
      this.#logger.error('oncemq: a NATS ordered member stopped', {
        group: this.#group,
        error: this.failure.message,
      });
    }
    return false;
  }

  /** True for a message after the drain's bound of its stream: the new count's consumers run it. */
  beyond(msg: { readonly seq: number; readonly info: { readonly stream: string } }): boolean {
    const bound = this.#bounds?.[msg.info.stream];
    return bound !== undefined && msg.seq > bound;
  }
}

/** What the ordering gate is told of a delivery acked unprocessed (after a drain's bound). */
export const skippedOutcome = (envelope: Envelope): Outcome => ({
  ...unprocessedBase(envelope),
  kind: 'duplicate',
  action: 'ack',
  source: 'redelivery',
});
