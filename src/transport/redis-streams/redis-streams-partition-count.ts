import type { Logger } from '../../core/logger.js';
import {
  checkPartitionCount,
  type PartitionCountRequest,
  type PartitionCountStore,
} from '../ordered/partition-count.js';
import type { StreamCommands } from './redis-streams-commands.js';
import type { StreamKeys } from './redis-streams-names.js';
import { PARTITIONS } from './redis-streams-ordered-scripts.js';
import { replyText } from './redis-streams-replies.js';

/** A count as Redis answers it: the recorded text read as a number (NaN when it is not one). */
function countOf(reply: unknown): number | null {
  const text = replyText(reply);
  return text === null ? null : Number(text);
}

/**
 * An ordered group's partition count in its key, `<prefix>:partitions:<group>`. The first record is
 * the `PARTITIONS` script (set only when nothing is set, in one step, so two members starting at
 * once agree on one count); comparing and refusing are `checkPartitionCount`'s. The drain's switch
 * to a new count is Redis's own: {@link counted}.
 */
export class StreamPartitionCount implements PartitionCountStore {
  readonly where: string;
  readonly #key: string;
  /** The recorded count this member waits to switch from (`onPartitionChange: 'drain'`). */
  #drainFrom: number | undefined;

  constructor(
    private readonly commands: StreamCommands,
    private readonly keys: StreamKeys,
    private readonly group: string,
    private readonly logger: Logger,
  ) {
    this.#key = keys.partitions(group);
    this.where = `key ${this.#key}`;
  }

  /** The recorded count, or null when none is recorded yet. */
  async read(): Promise<number | null> {
    return countOf(await this.commands.send(['GET', this.#key], 'GET the partition count'));
  }

  /** Records `count` unless a count is recorded; answers the one recorded afterwards. */
  async recordFirst(count: number): Promise<number> {
    return countOf(await this.commands.script(PARTITIONS, [this.#key], [String(count), ''])) ?? count;
  }

  /**
   * Records the member's count, or compares it with the recorded one: refused with
   * `partitionCountError`, or (`onPartitionChange: 'drain'`) drained first — see {@link counted}.
   */
  async check(request: PartitionCountRequest): Promise<void> {
    const check = await checkPartitionCount(this, request);
    if (check.change === 'none') return;
    this.#drainFrom = check.recorded;
    this.logger.warn(
      'oncemq: the ordered group has another partition count; it is drained before this member starts',
      { group: this.group, recorded: check.recorded, configured: request.count },
    );
  }

  /**
   * True once the group's recorded count is `count`: while the group drains from another, each call
   * tries the switch, and a lease round takes nothing until it is done.
   */
  async counted(count: number): Promise<boolean> {
    const from = this.#drainFrom;
    if (from === undefined) return true;
    const recorded = await this.#switchCount(from, count);
    if (recorded === count) {
      this.logger.info('oncemq: the ordered group was drained and its partition count recorded', {
        group: this.group,
        from,
        to: count,
      });
      this.#drainFrom = undefined;
      return true;
    }
    this.#drainFrom = recorded ?? undefined;
    return false;
  }

  /**
   * `drain`: records `count` in place of `from` once no lease of the `from` partitions is held (the
   * members with the old count closed, or their leases expired), in one script. The shards do not
   * change with the count, so nothing moves: the first owners of the new partitions take over what
   * the old ones left pending before they read anything new. Answers the count recorded afterwards.
   */
  async #switchCount(from: number, count: number): Promise<number | null> {
    const leases = Number.isInteger(from)
      ? Array.from({ length: from }, (_, index) => this.keys.lease(this.group, from, index))
      : [];
    return countOf(
      await this.commands.script(PARTITIONS, [this.#key, ...leases], [String(count), String(from)]),
    );
  }
}
