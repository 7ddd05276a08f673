import { ConfigError } from '../../core/errors.js';
import { validateGroup } from '../../core/group.js';
import {
  DEFAULT_DEAD_LETTER_LIMIT,
  readDeadLetter,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
} from '../dead-letters.js';
import type { StreamCommands } from './redis-streams-commands.js';
import type { CommandArg } from './redis-streams-connection.js';
import { readEntry, replayFields } from './redis-streams-entry.js';
import { ENTRY_ID_PATTERN, type StreamKeys } from './redis-streams-names.js';
import { parseEntries, replyNumber, type RawEntry } from './redis-streams-replies.js';
import { REPLAY } from './redis-streams-scripts.js';
import { checkGroup } from './redis-streams-topology.js';

/** Entries read per XRANGE while listing. */
const PAGE = 200;

/**
 * The dead letters of every group, one stream per group (`<prefix>:dead:<group>`). A replay stores a
 * fresh copy in the group's retry stream (an ordered group's: in the shard stream it came from,
 * marked for that group), so that group alone receives it, and deletes the dead letter in the same
 * script; a purge deletes them. A group that never subscribed (no retry stream
 * with its consumer group) is a {@link ConfigError}: a mistyped group or prefix never reads as "no
 * dead letters".
 */
export class StreamDeadLetters implements DeadLetters {
  constructor(
    private readonly commands: () => StreamCommands,
    private readonly keys: StreamKeys,
  ) {}

  async #checked(group: string): Promise<StreamCommands> {
    validateGroup(group);
    const commands = this.commands();
    await checkGroup(commands, group, [this.keys.retry(group)], 'group');
    return commands;
  }

  /** A dead letter, and its fields that are not text headers (a replay stores them again). */
  #letter(
    stream: string,
    entry: RawEntry,
  ): { readonly letter: DeadLetter; readonly unread: readonly CommandArg[] | undefined } | undefined {
    if (entry.fields === null) return undefined;
    const message = readEntry(stream, { ...entry, fields: entry.fields }, '');
    const letter = readDeadLetter(entry.id, message.headers, message.body, {
      stream,
      ...(message.nonKey === undefined ? {} : { nonKeyHeaders: message.nonKey }),
    });
    return { letter, unread: message.unread };
  }

  /** The group's dead-letter stream length (`XLEN`). */
  async depth(group: string): Promise<number> {
    const commands = await this.#checked(group);
    return replyNumber(await commands.send(['XLEN', this.keys.deadLetters(group)], 'counting dead letters'));
  }

  async list(query: DeadLetterQuery): Promise<readonly DeadLetter[]> {
    const commands = await this.#checked(query.group);
    const limit = query.limit ?? DEFAULT_DEAD_LETTER_LIMIT;
    if (!Number.isInteger(limit) || limit < 1) {
      throw new ConfigError('limit', `must be a whole number >= 1, got ${limit}`);
    }
    const stream = this.keys.deadLetters(query.group);
    const letters: DeadLetter[] = [];
    for (let start = '-'; letters.length < limit;) {
      const page = parseEntries(
        await commands.send(['XRANGE', stream, start, '+', 'COUNT', String(PAGE)], 'listing dead letters', {
          bytes: true,
        }),
      );
      for (const entry of page) {
        const letter = this.#letter(stream, entry)?.letter;
        if (letter === undefined || (query.reason !== undefined && letter.reason !== query.reason)) continue;
        letters.push(letter);
        if (letters.length === limit) break;
      }
      const last = page.at(-1);
      if (last === undefined || page.length < PAGE) break;
      start = `(${last.id}`;
    }
    return letters;
  }

  async replay(group: string, ids: readonly string[]): Promise<number> {
    const commands = await this.#checked(group);
    const stream = this.keys.deadLetters(group);
    let replayed = 0;
    for (const id of ids.filter((id) => ENTRY_ID_PATTERN.test(id))) {
      const [entry] = parseEntries(
        await commands.send(['XRANGE', stream, id, id], 'reading a dead letter', { bytes: true }),
      );
      const read = entry === undefined ? undefined : this.#letter(stream, entry);
      if (read === undefined) continue;
      const { letter, unread } = read;
      // A dead letter of an ordered group goes back on its shard stream, for that group only.
      const shard = this.keys.shardOf(letter.brokerId);
      const done = await commands.script(
        REPLAY,
        [stream, shard ?? this.keys.retry(group)],
        [id, ...replayFields(letter, shard === undefined ? undefined : group, unread)],
      );
      replayed += replyNumber(done);
    }
    return replayed;
  }

  async purge(group: string, ids: readonly string[]): Promise<number> {
    const commands = await this.#checked(group);
    const valid = ids.filter((id) => ENTRY_ID_PATTERN.test(id));
    if (valid.length === 0) return 0;
    return replyNumber(
      await commands.send(['XDEL', this.keys.deadLetters(group), ...valid], 'purging dead letters'),
    );
  }
}
