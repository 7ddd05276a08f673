import type { Envelope } from '../../core/envelope.js';
import type { DeadLetterCause } from '../dead-letters.js';
import type { StreamCommands } from './redis-streams-commands.js';
import type { CommandArg } from './redis-streams-connection.js';
import { deadLetterFields, retryFields } from './redis-streams-entry.js';
import type { StreamKeys } from './redis-streams-names.js';
import { replyNumber } from './redis-streams-replies.js';
import { ACK, DEAD_LETTER, KEEP_ALIVE, RETRY } from './redis-streams-scripts.js';

/** One delivered entry, as the settler needs it. */
export interface SettleTarget {
  readonly stream: string;
  readonly id: string;
  readonly envelope: Envelope;
  readonly unread?: readonly CommandArg[] | undefined;
}

interface AckBatch {
  readonly ids: string[];
  readonly waiters: { resolve: () => void; reject: (error: unknown) => void }[];
}

/** Most ids in one ack script call. */
const MAX_ACKS_PER_CALL = 512;

/**
 * Settles the deliveries of one member of a group, each only while its entry is still pending for
 * this member: a member whose entry another member claimed meanwhile settles nothing, so no copy is
 * stored twice. Acks of one turn of the event loop go to Redis as one script call per stream.
 */
export class StreamSettler {
  readonly #batches = new Map<string, AckBatch>();
  #scheduled = false;

  constructor(
    private readonly commands: StreamCommands,
    private readonly keys: StreamKeys,
    private readonly group: string,
    private readonly consumer: string,
  ) {}

  /** Acks the entry; resolves once Redis answered (the acks of one turn share a call). */
  ack(stream: string, id: string): Promise<void> {
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
   * Stores a copy carrying `deliveryCount` in the group's delayed set, due in `delayMs`, and acks the
   * entry, in one script. False when the entry is no longer this member's (nothing was done).
   */
  async retry(target: SettleTarget, delayMs: number, deliveryCount: number): Promise<boolean> {
    const delay = String(Math.max(0, Math.round(delayMs)));
    const done = await this.commands.script(
      RETRY,
      [target.stream, this.keys.delayed(this.group)],
      [
        this.group,
        this.consumer,
        target.id,
        delay,
        ...retryFields(target.envelope, deliveryCount, target.unread),
      ],
    );
    return replyNumber(done) === 1;
  }

  /**
   * Stores the dead letter in the group's dead-letter stream and acks the entry, in one script. False
   * when the entry is no longer this member's (nothing was done).
   */
  async deadLetter(target: SettleTarget, cause: DeadLetterCause): Promise<boolean> {
    const done = await this.commands.script(
      DEAD_LETTER,
      [target.stream, this.keys.deadLetters(this.group)],
      [this.group, this.consumer, target.id, ...deadLetterFields(target.envelope, cause, target.unread)],
    );
    return replyNumber(done) === 1;
  }

  /** Resets the entry's idle time. False when the entry is no longer this member's. */
  async keepAlive(stream: string, id: string): Promise<boolean> {
    return (
      replyNumber(await this.commands.script(KEEP_ALIVE, [stream], [this.group, this.consumer, id])) === 1
    );
  }
}
