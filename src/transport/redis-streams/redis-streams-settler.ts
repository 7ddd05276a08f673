import type { Logger } from '../../core/logger.js';
import type { DeadLetterOutcome, RetryOutcome, Settler } from '../settler.js';
import type { StreamCommands } from './redis-streams-commands.js';
import type { Delivery } from './redis-streams-delivery.js';
import { deadLetterFields, retryFields } from './redis-streams-entry.js';
import type { StreamKeys } from './redis-streams-names.js';
import type { StreamPartitions } from './redis-streams-partitions.js';
import { replyNumber } from './redis-streams-replies.js';
import { ACK, DEAD_LETTER, KEEP_ALIVE, RETRY } from './redis-streams-scripts.js';

interface AckBatch {
  readonly ids: string[];
  readonly waiters: { resolve: () => void; reject: (error: unknown) => void }[];
}

/** Most ids in one ack script call. */
const MAX_ACKS_PER_CALL = 512;

/** What a settler tells its subscription. */
export interface SettlerSite {
  readonly logger: Logger;
  /** A retry copy was stored, due in `delayMs`: the member moves it when due. */
  retried(delayMs: number): void;
  /** The processor threw: the delivery stays pending and is read again after the failure backoff. */
  failed(error: unknown): void;
}

/** Resets a pending entry's idle time. False when the entry is no longer pending for `consumer`. */
export async function keepEntryAlive(
  commands: StreamCommands,
  group: string,
  consumer: string,
  stream: string,
  id: string,
): Promise<boolean> {
  return replyNumber(await commands.script(KEEP_ALIVE, [stream], [group, consumer, id])) === 1;
}

/**
 * Settles the deliveries of one member of a group, each only while its entry is still pending for
 * this member: a member whose entry another member claimed meanwhile settles nothing (and logs that
 * it dropped the settle), so no copy is stored twice. Acks of one turn of the event loop go to Redis
 * as one script call per stream; a retry and a dead letter store their copy and ack in one script.
 */
export class StreamSettler implements Settler<Delivery> {
  readonly #batches = new Map<string, AckBatch>();
  #scheduled = false;

  constructor(
    private readonly commands: StreamCommands,
    private readonly keys: StreamKeys,
    private readonly group: string,
    private readonly consumer: string,
    private readonly site: SettlerSite,
  ) {}

  /** Acks the delivery's entry (see {@link ackEntry}). */
  ack(delivery: Delivery): Promise<void> {
    return this.ackEntry(delivery.stream, delivery.id);
  }

  /** Acks an entry; resolves once Redis answered (the acks of one turn share a call). */
  ackEntry(stream: string, id: string): Promise<void> {
    return new Promise((resolve, reject) => {
      let batch = this.#batches.get(stream);
      if (batch === undefined) {
        batch = { ids: [], waiters: [] };
        this.#batches.set(stream, batch);
      }
      batch.ids.push(id);
      batch.waiters.push({ resolve, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        void this.#flush();
      });
    });
  }

  async #flush(): Promise<void> {
    const batches = [...this.#batches];
    this.#batches.clear();
    await Promise.all(
      batches.map(async ([stream, batch]) => {
        try {
          for (let start = 0; start < batch.ids.length; start += MAX_ACKS_PER_CALL) {
            const ids = batch.ids.slice(start, start + MAX_ACKS_PER_CALL);
            await this.commands.script(ACK, [stream], [this.group, this.consumer, ...ids]);
          }
          for (const waiter of batch.waiters) waiter.resolve();
        } catch (error) {
          for (const waiter of batch.waiters) waiter.reject(error);
        }
      }),
    );
  }

  /**
   * Stores a copy carrying `nextDeliveryCount` in the group's delayed set, due in `delayMs`, and acks
   * the entry, in one script; nothing is done when the entry is no longer this member's.
   */
  async retry(delivery: Delivery, outcome: RetryOutcome): Promise<void> {
    const delay = String(Math.max(0, Math.round(outcome.delayMs)));
    const done = await this.commands.script(
      RETRY,
      [delivery.stream, this.keys.delayed(this.group)],
      [
        this.group,
        this.consumer,
        delivery.id,
        delay,
        ...retryFields(delivery.envelope, outcome.nextDeliveryCount, delivery.unread),
      ],
    );
    this.site.retried(outcome.delayMs);
    this.#done(replyNumber(done) === 1, delivery);
  }

  /**
   * Stores the dead letter in the group's dead-letter stream and acks the entry, in one script;
   * nothing is done when the entry is no longer this member's.
   */
  async deadLetter(delivery: Delivery, outcome: DeadLetterOutcome): Promise<void> {
    const { reason, error, key } = outcome;
    const cause = { group: this.group, reason, error, key, deliveryCount: outcome.deliveryCount };
    const done = await this.commands.script(
      DEAD_LETTER,
      [delivery.stream, this.keys.deadLetters(this.group)],
      [
        this.group,
        this.consumer,
        delivery.id,
        ...deadLetterFields(delivery.envelope, cause, delivery.unread),
      ],
    );
    this.#done(replyNumber(done) === 1, delivery);
  }

  /** Settles nothing: the entry stays pending, and the member reads it again after the failure backoff. */
  fail(_delivery: Delivery, error: unknown): Promise<void> {
    this.site.failed(error);
    return Promise.resolve();
  }

  /** Resets the entry's idle time. False when the entry is no longer this member's. */
  keepAlive(stream: string, id: string): Promise<boolean> {
    return keepEntryAlive(this.commands, this.group, this.consumer, stream, id);
  }

  #done(done: boolean, delivery: Delivery): void {
    if (done) return;
    this.site.logger.info('oncemq: another member claimed this delivery meanwhile; its settle is dropped', {
      group: this.group,
      brokerId: delivery.slot,
    });
  }
}

/**
 * Settles the deliveries of an ordered member through its partitions: an ack, or a dead letter stored
 * with the ack in one script, each only while the member holds the partition's lease and the entry is
 * pending for it (the fence); a refused settle rejects with `NotOwnerError`. An ordered delivery is
 * never retried through the broker (the gate runs it again in place) and a failed one stays pending.
 */
export class FencedStreamSettler implements Settler<Delivery> {
  constructor(
    private readonly partitions: Pick<StreamPartitions, 'ack' | 'deadLetter'>,
    private readonly group: string,
  ) {}

  /** Acks the entry under the fence. */
  ack(delivery: Delivery): Promise<void> {
    return this.partitions.ack(delivery.stream, delivery.id);
  }

  /** Refused: an ordered delivery is retried in place by its gate, never stored again. */
  retry(delivery: Delivery): Promise<void> {
    return Promise.reject(
      new Error(`an ordered delivery is retried in place, not stored again: ${delivery.slot}`),
    );
  }

  /** Stores the dead letter and acks the entry, in one script, under the fence. */
  deadLetter(delivery: Delivery, outcome: DeadLetterOutcome): Promise<void> {
    const { reason, error, key, deliveryCount } = outcome;
    return this.partitions.deadLetter(delivery, { group: this.group, reason, error, key, deliveryCount });
  }

  /** Settles nothing: the entry stays pending for its partition's owner. */
  fail(): Promise<void> {
    return Promise.resolve();
  }
}
