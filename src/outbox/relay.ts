import { ConfigError, errorText } from '../core/errors.js';
import type { Transport } from '../transport/transport.js';
import type { Outbox, OutboxEntry } from './outbox.js';
import { openOutboxSession, type OutboxSession } from './outbox-database.js';
import { CLEANUP_BATCH } from './outbox-statements.js';
import {
  RelayCrash,
  resolveRelayConfig,
  type RelayConfig,
  type ResolvedRelayConfig,
} from './relay-config.js';
import { claimRows, cleanSent, markSent, releaseRows, type RelayedMessage } from './relay-rows.js';

/** Batches a running relay has in flight at once: one settling while the next is claimed and sent. */
const PIPELINE_DEPTH = 2;

/** What one round of a relay did. */
export interface RelayRound {
  /** Rows the round claimed. */
  readonly claimed: number;
  /** Rows published and marked sent. */
  readonly published: number;
  /** Rows whose publish failed; they are tried again after a back-off. */
  readonly failed: number;
}

/** Counters of a relay since it was created, as {@link Relay.metrics} returns them. */
export interface RelayMetrics {
  /** Rows published and marked sent. */
  readonly published: number;
  /** Publishes that failed (the rows were tried again later). */
  readonly failed: number;
  /** Rows published again after an earlier claim of theirs (a relay died or lost its lease). */
  readonly republished: number;
  /** Sent rows deleted after their retention. */
  readonly cleaned: number;
  /** Rounds run. */
  readonly rounds: number;
}

/**
 * The outbox relay: claims pending rows, publishes them with broker confirms (a row only once every
 * earlier row of its ordering key is sent), marks them sent, backs off on broker errors, and deletes
 * sent rows after their retention. Several relays share the work.
 */
export class Relay<Tx> {
  /** The owner token written into the leases of the rows this relay claims (`name` plus a random suffix). */
  readonly owner: string;
  readonly #outbox: Outbox<Tx>;
  readonly #transport: Pick<Transport, 'name' | 'publish'>;
  readonly #session: OutboxSession<Tx>;
  readonly #config: ResolvedRelayConfig;
  #running = false;
  #crashed = false;
  #dead = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #woken = false;
  #unlisten: (() => Promise<void>) | undefined;
  #backoffMs = 0;
  #cleanedAt = 0;
  #metrics = { published: 0, failed: 0, republished: 0, cleaned: 0, rounds: 0 };

  constructor(config: RelayConfig<Tx>) {
    const given = config as unknown as Partial<
      Record<'transport' | 'outbox', Record<string, unknown> | null>
    >;
    if (typeof given.transport?.publish !== 'function') {
      throw new ConfigError('transport', 'must be a transport (an object with publish(message))');
    }
    if (typeof given.outbox?.add !== 'function') throw new ConfigError('outbox', 'pass createOutbox(...)');
    this.#config = resolveRelayConfig(config);
    this.owner = this.#config.owner;
    this.#outbox = config.outbox;
    this.#transport = config.transport;
    this.#session = openOutboxSession(config.outbox.dialect, config.database);
  }

  /** True between `start()` and `stop()` (or a crash). */
  get running(): boolean {
    return this.#running;
  }

  /** True once a fault hook made the relay stop as if its process died. */
  get crashed(): boolean {
    return this.#crashed;
  }

  /** A snapshot of the relay's counters. */
  metrics(): RelayMetrics {
    return { ...this.#metrics };
  }

  /** Checks the outbox table exists (run `outbox.migrate()` first), then relays until stopped. */
  async start(): Promise<void> {
    if (this.#running) return;
    try {
      await this.#session.transaction((tx) =>
        this.#outbox.dialect.query(tx, this.#outbox.statements.probe, []),
      );
    } catch (error) {
      throw new ConfigError(
        'outbox',
        `cannot read the outbox table ${this.#outbox.config.messages} (${errorText(error)}); run outbox.migrate(database) first`,
        { cause: error },
      );
    }
    this.#running = true;
    await this.#listen();
    this.#loop = this.#run();
  }

  /** Stops taking rows, lets the round in progress publish and mark what it claimed, stops listening. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#wakeUp();
    await this.#loop;
    this.#loop = undefined;
    await this.#unlisten?.();
    this.#unlisten = undefined;
  }

  /** Wakes a waiting relay now (a commit just added rows). */
  wake(): void {
    this.#wakeUp();
  }

  /**
   * Inline dispatch: publishes the rows just added (by their entries) at once, right after the
   * caller's commit, instead of waiting for the next round. Anything it cannot send now (a row
   * behind an unsent one of its ordering key, a broker error) is left to the relay's rounds.
   */
  async dispatch(entries: readonly OutboxEntry[]): Promise<RelayRound> {
    if (entries.length === 0) return { claimed: 0, published: 0, failed: 0 };
    try {
      return await this.#round(entries.map((entry) => entry.id));
    } catch (error) {
      this.#config.logger.warn('oncemq: inline dispatch failed; the relay sends the rows later', {
        error: errorText(error),
      });
      return { claimed: 0, published: 0, failed: entries.length };
    }
  }

  /** Runs one round now: claim, publish, mark. Rejects when the database cannot be reached. */
  runOnce(): Promise<RelayRound> {
    return this.#round(undefined);
  }

  async #listen(): Promise<void> {
    const { listen, logger } = this.#config;
    const channel = this.#outbox.config.channel;
    if (!listen || channel === undefined || this.#session.listen === undefined) return;
    try {
      this.#unlisten = await this.#session.listen(
        channel,
        () => this.#wakeUp(),
        (error) => {
          this.#unlisten = undefined;
          logger.warn('oncemq: the relay lost its LISTEN connection; polling until it is back', {
            error: errorText(error),
          });
        },
      );
    } catch (error) {
      logger.warn('oncemq: the relay cannot LISTEN; polling', { error: errorText(error) });
    }
  }

  #wakeUp(): void {
    this.#woken = true;
    this.#wake?.();
  }

  #sleep(ms: number): Promise<void> {
    if (this.#woken || !this.#running) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    }).then(() => {
      this.#wake = undefined;
      this.#woken = false;
    });
  }

  /**
   * Relays until stopped, two rounds deep: the next batch is claimed (and published) while the rows
   * of the previous one are still being confirmed and marked, so the database's round trips overlap
   * the broker's. The batches are disjoint, and a row's successor of its ordering key is not a
   * candidate until the row is marked sent, so per-key order holds across the overlap.
   */
  async #run(): Promise<void> {
    const { batchSize, pollIntervalMs } = this.#config;
    const settling = new Set<Promise<void>>();
    const last: { failed: boolean; error?: unknown } = { failed: false };
    const settle = (rows: RelayedMessage[]): void => {
      const done = this.#settle(rows).then(
        (round) => {
          if (round.failed > 0) last.failed = true;
        },
        (error: unknown) => {
          if (error instanceof RelayCrash) {
            this.#crashed = true;
            this.#running = false;
            return;
          }
          last.failed = true;
          last.error = error;
        },
      );
      settling.add(done);
      void done.finally(() => settling.delete(done));
    };
    while (this.#running) {
      let wait = pollIntervalMs;
      try {
        const rows = await this.#claim(undefined);
        const claimed = rows.length;
        if (claimed > 0) settle(rows);
        // At most PIPELINE_DEPTH batches in flight; a batch short of full waits for its settling,
        // so that an idle relay's backoff and sleep see how the last rows went.
        while (settling.size >= (claimed >= batchSize ? PIPELINE_DEPTH : 1)) await Promise.race(settling);
        if (last.failed) {
          wait = this.#backoff();
          if (last.error !== undefined) this.#roundFailed(last.error, wait);
        } else {
          this.#backoffMs = 0;
          if (claimed >= batchSize) wait = 0;
        }
        last.failed = false;
        last.error = undefined;
        await this.#cleanup();
        if (this.#unlisten === undefined && this.running) await this.#listen();
      } catch (error) {
        wait = this.#backoff();
        this.#roundFailed(error, wait);
      }
      if (wait > 0 && this.running) await this.#sleep(wait);
    }
    await Promise.all(settling);
  }

  #roundFailed(error: unknown, waitMs: number): void {
    this.#config.logger.warn('oncemq: relay round failed; backing off', { error: errorText(error), waitMs });
  }

  #backoff(): number {
    const { minBackoffMs, maxBackoffMs } = this.#config;
    this.#backoffMs = Math.min(maxBackoffMs, this.#backoffMs === 0 ? minBackoffMs : this.#backoffMs * 2);
    return this.#backoffMs;
  }

  /** A row's retry delay after its n-th failed publish: doubling from minBackoff, at most maxBackoff. */
  #retryDelay(attempts: number): number {
    const { minBackoffMs, maxBackoffMs } = this.#config;
    return Math.min(maxBackoffMs, minBackoffMs * 2 ** Math.min(20, Math.max(0, attempts - 1)));
  }

  async #round(ids: readonly string[] | undefined): Promise<RelayRound> {
    const rows = await this.#claim(ids);
    if (rows.length === 0) return { claimed: 0, published: 0, failed: 0 };
    return this.#settle(rows);
  }

  /** Claims up to a batch of rows that may go now (`ids`: only those rows). */
  async #claim(ids: readonly string[] | undefined): Promise<RelayedMessage[]> {
    const { owner, leaseMs, batchSize } = this.#config;
    const now = Date.now();
    const rows = await claimRows(this.#session, this.#outbox, {
      owner,
      now,
      leaseUntil: now + leaseMs,
      limit: ids === undefined ? batchSize : ids.length,
      ...(ids === undefined ? {} : { ids }),
    });
    this.#metrics.rounds++;
    return rows;
  }

  /** Publishes claimed rows, marks the confirmed ones sent and gives the others back for later. */
  async #settle(rows: readonly RelayedMessage[]): Promise<RelayRound> {
    const { owner } = this.#config;
    // Every claimed row is the first unsent one of its ordering key: they may all be in flight at once.
    const results = await Promise.allSettled(rows.map((row) => this.#publish(row)));
    const sent: RelayedMessage[] = [];
    const failed: { row: RelayedMessage; retryAt: number; error: string }[] = [];
    let crash: RelayCrash | undefined;
    results.forEach((result, i) => {
      const row = rows[i] as RelayedMessage;
      if (result.status === 'fulfilled') sent.push(row);
      else if (result.reason instanceof RelayCrash) crash = result.reason;
      else
        failed.push({
          row,
          retryAt: Date.now() + this.#retryDelay(row.attempts),
          error: errorText(result.reason),
        });
    });
    if (crash !== undefined) throw crash;
    await markSent(this.#session, this.#outbox, owner, sent);
    await releaseRows(this.#session, this.#outbox, owner, failed);
    this.#metrics.published += sent.length;
    this.#metrics.republished += sent.filter((row) => row.attempts > 1).length;
    this.#metrics.failed += failed.length;
    for (const { row, error } of failed) {
      this.#config.logger.warn('oncemq: relay publish failed; the row is tried again', {
        topic: row.topic,
        key: row.key,
        attempts: row.attempts,
        error,
      });
    }
    return { claimed: rows.length, published: sent.length, failed: failed.length };
  }

  async #publish(row: RelayedMessage): Promise<void> {
    if (this.#dead) throw new RelayCrash('the relay died before this publish');
    try {
      this.#config.faults?.beforePublish?.(row);
    } catch (error) {
      if (error instanceof RelayCrash) this.#dead = true;
      throw error;
    }
    const { publishTimeoutMs } = this.#config;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no confirm from ${this.#transport.name} within ${publishTimeoutMs}ms`)),
        publishTimeoutMs,
      );
    });
    try {
      await Promise.race([this.#transport.publish(row.message), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #cleanup(): Promise<void> {
    const { cleanupEveryMs, retentionMs } = this.#config;
    const now = Date.now();
    if (now - this.#cleanedAt < cleanupEveryMs) return;
    this.#cleanedAt = now;
    this.#metrics.cleaned += await cleanSent(this.#session, this.#outbox, now - retentionMs, CLEANUP_BATCH);
  }
}

/** Creates a relay for `outbox`; `start()` it, `stop()` it (draining) at shutdown. */
export function createRelay<Tx>(config: RelayConfig<Tx>): Relay<Tx> {
  return new Relay(config);
}
