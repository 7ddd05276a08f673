import type { PartitionCountStore } from '../ordered/partition-count.js';
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
 * to a new count is Redis's own: {@link switchCount}.
 */
export class StreamPartitionCount implements PartitionCountStore {
  readonly where: string;
  readonly #key: string;

  constructor(
    private readonly commands: StreamCommands,
    private readonly keys: StreamKeys,
    private readonly group: string,
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
   * `drain`: records `count` in place of `from` once no lease of the `from` partitions is held (the
   * members with the old count closed, or their leases expired), in one script. The shards do not
   * change with the count, so nothing moves: the first owners of the new partitions take over what
   * the old ones left pending before they read anything new. Answers the count recorded afterwards.
   */
  async switchCount(from: number, count: number): Promise<number | null> {
    const leases = Number.isInteger(from)
      ? Array.from({ length: from }, (_, index) => this.keys.lease(this.group, from, index))
      : [];
    return countOf(
      await this.commands.script(PARTITIONS, [this.#key, ...leases], [String(count), String(from)]),
    );
  }
}
