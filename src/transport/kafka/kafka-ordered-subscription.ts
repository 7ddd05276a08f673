import type { Admin } from '@platformatic/kafka';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { OrderedLane } from '../ordered/ordered-lane.js';
import { settleOutcome } from '../settler.js';
import type { OrderingOptions, Processor } from '../transport.js';
import type { KafkaNames } from './kafka-names.js';
import { KafkaPartitionCount } from './kafka-partition-count.js';
import type { KafkaMessage } from './kafka-record.js';
import type { KafkaSettler } from './kafka-settler.js';

/** How often a draining member reads the group's committed offsets. */
const DRAIN_POLL_MS = 250;

/** Records an ordered member holds at once, per unit of `concurrency`, before it pauses fetching. */
export const ORDERED_PENDING_PER_SLOT = 16;

/** The drain of a grown topic, as a member sees it. */
export interface MemberDrain {
  /** Whether a record was published before the change (in an old partition, below its end offset then). */
  before(message: KafkaMessage): boolean;
  /**
   * Resolves once the group committed every old partition up to its end offset (and the new count
   * is recorded); `stop` answers true when the member closes first.
   */
  finished(stop: () => boolean): Promise<void>;
}

/** What the ordered side of a Kafka subscription needs. */
export interface KafkaOrderedInit {
  readonly group: string;
  readonly topics: readonly string[];
  readonly ordering: OrderingOptions;
  readonly processor: Processor;
  readonly settler: KafkaSettler;
  readonly concurrency: number;
  readonly admin: Admin;
  readonly names: KafkaNames;
  readonly logger: Logger;
}

/**
 * What makes a Kafka subscription ordered. Its main member (the broker's reader, `KafkaMember`) runs
 * each record through an {@link OrderedLane}: one key at a time, a retry waits in place (never a retry
 * topic, which would let the key's later records pass it), and a dead letter is a confirmed copy in the
 * group's dead-letter topic before the key's next record starts (`settleBeforeAnswer`). Before it
 * joins, each topic's partition count is compared with the one the group last consumed it with: a
 * grown topic is refused, or drained first (see `KafkaPartitionCount`).
 */
export class KafkaOrderedSubscription {
  readonly #init: KafkaOrderedInit;

  constructor(init: KafkaOrderedInit) {
    this.#init = init;
  }

  /** A new lane for the member: one when it starts, another each time its connection is lost. */
  lane(): OrderedLane<KafkaMessage> {
    const { processor, settler, ordering, concurrency, logger } = this.#init;
    return new OrderedLane<KafkaMessage>({
      ordering,
      concurrency,
      logger,
      processor,
      settle: (message, outcome, envelope) => settleOutcome(settler, { message, envelope }, outcome),
    });
  }

  /**
   * Checks each topic's partition count against the group's record (recording it on first use) and
   * answers the drain the member runs first when a topic grew and the member subscribed with
   * `onPartitionChange: 'drain'`; a refusal throws.
   */
  async drain(): Promise<MemberDrain | undefined> {
    const { admin, names, group, topics, ordering, logger } = this.#init;
    const count = new KafkaPartitionCount(admin, names, group);
    const drain = await count.check(topics, ordering);
    if (drain.size === 0) return undefined;
    logger.warn('oncemq: draining the old partitions of grown Kafka topics first', {
      group,
      topics: Object.fromEntries([...drain].map(([topic, { from, to }]) => [topic, `${from} → ${to}`])),
    });
    return {
      before: (message) => {
        const ends = drain.get(message.topic)?.ends;
        if (ends === undefined) return true;
        return message.partition < ends.length && message.offset < (ends[message.partition] ?? 0n);
      },
      finished: async (stop) => {
        for (const [topic, { from, to, ends }] of drain) {
          for (;;) {
            if (stop()) return;
            try {
              if (await count.drained(topic, ends)) break;
            } catch (error) {
              logger.warn('oncemq: cannot read the drain’s progress yet', { error: errorText(error) });
            }
            await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
          }
          await count.record(topic, to, from);
        }
      },
    };
  }
}
