import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { Pause } from '../../core/pause.js';

/** What one round of lease writes did: partitions renewed, lost to another member, newly taken. */
export interface LeaseRound<T> {
  readonly renewed: readonly number[];
  /** Held before the round and no longer ours (it ran out and another member took it, or it is gone). */
  readonly lost: readonly number[];
  /** Free before the round and ours now, with what the broker tells of how the previous owner left it. */
  readonly taken: readonly { readonly index: number; readonly predecessor: T }[];
}

/**
 * Where a broker keeps the leases of an ordered group's partitions: a lease stream's subjects (NATS),
 * `SET NX PX` keys (Redis Streams). A partition neither renewed nor lost in a round (its write
 * failed) is let go by the watchdog once its lease may have run out.
 */
export interface LeaseStore<T> {
  /** Renews each partition of `held`, tries to take each of `free`. */
  round(held: readonly number[], free: readonly number[]): Promise<LeaseRound<T>>;
  /** Gives a partition up: `clean` when every delivery of it is settled or handed back. */
  release(index: number, clean: boolean): Promise<void>;
}

/** What a member does when a partition becomes or stops being its own. */
export interface LeaseEvents<T> {
  /** A free partition is this member's now. */
  taken(index: number, predecessor: T): void;
  /** A partition is no longer this member's: stop consuming it at once (the lease may be another's). */
  lost(index: number, why: string): void;
}

export interface PartitionLeasesOptions {
  /** How many partitions the group has: 0 … count-1. */
  readonly count: number;
  /** How long a lease lasts without renewal at the broker. */
  readonly leaseMs: number;
  readonly logger: Logger;
  /** Names the group in log lines. */
  readonly group: string;
  /**
   * Runs before each round: false ends the rounds (the member closes). Answers, as `since`, the time
   * the round's writes count from when it is earlier than now (the last read of what allows the
   * pulls, say); the round's own start otherwise.
   */
  readonly beforeRound?: () => Promise<{ readonly go: boolean; readonly since?: number }>;
}

/** Why a partition was let go without a lost write: its last renewal is too old. */
export const NOT_RENEWED = 'its lease was not renewed in time';
/** Why a partition was let go after a renewal was refused. */
export const TAKEN_OVER = 'its lease went to another member';

/**
 * The one renew / let-go rule of every partition lease: a round every third of the lease renews the
 * partitions held and takes free ones; a partition is let go two thirds of a lease after the write
 * that last renewed it was sent, unless a later renewal succeeded first — before the lease can run out
 * at the broker and another member take it. A refused renewal lets the partition go at once.
 */
export class PartitionLeases<T> {
  readonly #store: LeaseStore<T>;
  readonly #events: LeaseEvents<T>;
  readonly #options: PartitionLeasesOptions;
  readonly #held = new Set<number>();
  readonly #renewedAt = new Map<number, number>();
  readonly #watchdogs = new Map<number, NodeJS.Timeout>();
  readonly #pause = new Pause();
  #running = false;
  #loop: Promise<void> | undefined;

  constructor(store: LeaseStore<T>, events: LeaseEvents<T>, options: PartitionLeasesOptions) {
    this.#store = store;
    this.#events = events;
    this.#options = options;
  }

  /** Starts the rounds; resolves after the first one. */
  async start(): Promise<void> {
    this.#running = true;
    await this.round();
    this.#loop = this.#rounds();
  }

  /** The partitions held now. */
  get held(): ReadonlySet<number> {
    return this.#held;
  }

  /** When this member lets `index` go unless it renews the lease again; undefined when not held. */
  letGoAt(index: number): number | undefined {
    const renewedAt = this.#renewedAt.get(index);
    return renewedAt === undefined ? undefined : renewedAt + (this.#options.leaseMs * 2) / 3;
  }

  /** One round now (also run every third of the lease). */
  async round(): Promise<void> {
    let since = Date.now();
    if (this.#options.beforeRound !== undefined) {
      const before = await this.#options.beforeRound();
      if (!before.go) {
        this.#running = false;
        return;
      }
      since = Math.min(since, before.since ?? since);
    }
    const held = [...this.#held];
    const free = Array.from({ length: this.#options.count }, (_, index) => index).filter(
      (index) => !this.#held.has(index),
    );
    const round = await this.#store.round(held, free);
    for (const index of round.renewed) if (this.#held.has(index)) this.#watch(index, since);
    for (const index of round.lost) this.#letGo(index, TAKEN_OVER);
    for (const { index, predecessor } of round.taken) {
      if (!this.#running) {
        await this.#store.release(index, true);
        continue;
      }
      this.#held.add(index);
      this.#watch(index, since);
      this.#events.taken(index, predecessor);
    }
  }

  /** Releases a partition this member stopped consuming; `clean` when nothing of it is left pending. */
  async release(index: number, clean: boolean): Promise<void> {
    this.#forget(index);
    await this.#store.release(index, clean);
  }

  /** Ends the rounds and the watchdogs; the partitions held stay held until released. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#pause.wake();
    await this.#loop;
    for (const timer of this.#watchdogs.values()) clearTimeout(timer);
    this.#watchdogs.clear();
  }

  async #rounds(): Promise<void> {
    const everyMs = Math.max(10, Math.floor(this.#options.leaseMs / 3));
    for (;;) {
      await this.#pause.for(everyMs);
      if (!this.#running) return;
      try {
        await this.round();
      } catch (error) {
        this.#options.logger.warn('oncemq: a round of partition leases failed; it runs again', {
          group: this.#options.group,
          error: errorText(error),
        });
      }
    }
  }

  #watch(index: number, renewedAt: number): void {
    clearTimeout(this.#watchdogs.get(index));
    this.#renewedAt.set(index, renewedAt);
    const leftMs = (this.letGoAt(index) ?? renewedAt) - Date.now();
    this.#watchdogs.set(
      index,
      setTimeout(() => this.#letGo(index, NOT_RENEWED), Math.max(0, leftMs)),
    );
  }

  #letGo(index: number, why: string): void {
    if (!this.#held.has(index)) return;
    this.#forget(index);
    this.#events.lost(index, why);
  }

  #forget(index: number): void {
    clearTimeout(this.#watchdogs.get(index));
    this.#watchdogs.delete(index);
    this.#renewedAt.delete(index);
    this.#held.delete(index);
  }
}
