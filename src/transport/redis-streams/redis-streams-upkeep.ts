import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { StreamCommands } from './redis-streams-commands.js';
import { parseAutoClaim, replyNumber, type RawEntry } from './redis-streams-replies.js';
import { DELIVERY_COUNTS, PROMOTE, TRIM } from './redis-streams-scripts.js';

/** Most delayed retries moved into the retry stream by one script call. */
const PROMOTE_LIMIT = 200;

/** What the upkeep of one member needs from its subscription. */
export interface UpkeepMember {
  readonly group: string;
  readonly consumer: string;
  /** Topic streams and the group's retry stream. */
  readonly streams: readonly string[];
  readonly retryStream: string;
  readonly delayedKey: string;
  readonly visibilityMs: number;
  readonly retryPollMs: number;
  readonly retentionMs: number;
  readonly trimEveryMs: number;
  readonly logger: Logger;
  /** Deliveries this member can take now. */
  free(): number;
  /** Hands out entries this member claimed, with their broker delivery counts. */
  claimed(stream: string, entries: readonly RawEntry[], counts: ReadonlyMap<string, number>): void;
}

/** The delivery counts of `entries`, from the pending list. */
export async function deliveryCounts(
  commands: StreamCommands,
  group: string,
  stream: string,
  entries: readonly RawEntry[],
): Promise<Map<string, number>> {
  const reply = await commands.script(
    DELIVERY_COUNTS,
    [stream],
    [group, ...entries.map((entry) => entry.id)],
  );
  const counts = new Map<string, number>();
  const list = Array.isArray(reply) ? reply : [];
  entries.forEach((entry, index) => counts.set(entry.id, replyNumber(list[index] ?? 0)));
  return counts;
}

/**
 * The timers of one member: takes over entries idle past the visibility in any member of the group
 * (`XAUTOCLAIM`, every half visibility: a dead member's deliveries never stay stuck — TRANSPORTS.md
 * Redis #1), moves the group's due delayed retries into its retry stream, and trims its streams.
 */
export class StreamUpkeep {
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #cursors = new Map<string, string>();
  #promoteTimer: NodeJS.Timeout | undefined;
  #promoteAt = Number.POSITIVE_INFINITY;
  #running = new Set<Promise<void>>();
  #stopped = false;

  constructor(
    private readonly commands: StreamCommands,
    private readonly member: UpkeepMember,
  ) {}

  start(): void {
    const { visibilityMs, trimEveryMs } = this.member;
    this.#every(Math.max(10, Math.floor(visibilityMs / 2)), () => this.#autoClaim());
    if (trimEveryMs > 0) this.#every(trimEveryMs, () => this.#trim());
    this.promoteIn(0);
  }

  /** Runs the move of due retries in `delayMs` at the latest (a retry this member just scheduled). */
  promoteIn(delayMs: number): void {
    if (this.#stopped) return;
    const at = Date.now() + delayMs;
    if (at >= this.#promoteAt) return;
    clearTimeout(this.#promoteTimer);
    this.#promoteAt = at;
    this.#promoteTimer = setTimeout(() => {
      this.#promoteAt = Number.POSITIVE_INFINITY;
      this.#promoteTimer = undefined;
      this.#track(this.#promote());
    }, delayMs);
    this.#promoteTimer.unref();
  }

  /** Stops the timers and waits for the rounds already running. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#timers) clearInterval(timer);
    this.#timers.clear();
    clearTimeout(this.#promoteTimer);
    await Promise.all(this.#running);
  }

  #every(ms: number, round: () => Promise<void>): void {
    let busy = false;
    const timer = setInterval(() => {
      if (busy || this.#stopped) return;
      busy = true;
      this.#track(round().finally(() => (busy = false)));
    }, ms);
    timer.unref();
    this.#timers.add(timer);
  }

  #track(round: Promise<void>): void {
    const tracked = round.catch((error: unknown) => {
      this.member.logger.warn('oncemq: a Redis Streams upkeep round failed; it runs again', {
        group: this.member.group,
        error: errorText(error),
      });
    });
    this.#running.add(tracked);
    void tracked.finally(() => this.#running.delete(tracked));
  }

  async #autoClaim(): Promise<void> {
    const { group, consumer, visibilityMs, logger } = this.member;
    for (const stream of this.member.streams) {
      const free = this.member.free();
      if (free <= 0 || this.#stopped) return;
      const reply = await this.commands.send(
        [
          'XAUTOCLAIM',
          stream,
          group,
          consumer,
          String(visibilityMs),
          this.#cursors.get(stream) ?? '0-0',
          'COUNT',
          String(free),
        ],
        'XAUTOCLAIM',
        { bytes: true },
      );
      const { next, entries, deleted } = parseAutoClaim(reply);
      this.#cursors.set(stream, next);
      if (deleted.length > 0) {
        logger.error('oncemq: pending entries were deleted from their stream before they were acked: lost', {
          group,
          stream,
          ids: deleted,
        });
      }
      if (entries.length === 0) continue;
      const counts = await deliveryCounts(this.commands, group, stream, entries);
      this.member.claimed(stream, entries, counts);
    }
  }

  async #promote(): Promise<void> {
    let next = this.member.retryPollMs;
    try {
      const reply = await this.commands.script(
        PROMOTE,
        [this.member.delayedKey, this.member.retryStream],
        [String(PROMOTE_LIMIT)],
      );
      const [moved, wait] = Array.isArray(reply) ? reply.map(replyNumber) : [0, -1];
      if (moved === PROMOTE_LIMIT) next = 0;
      else if (wait !== undefined && wait >= 0) next = Math.min(wait, next);
    } finally {
      this.promoteIn(next);
    }
  }

  async #trim(): Promise<void> {
    for (const stream of this.member.streams) {
      if (this.#stopped) return;
      await this.commands.script(TRIM, [stream], [String(this.member.retentionMs)]);
    }
  }
}
