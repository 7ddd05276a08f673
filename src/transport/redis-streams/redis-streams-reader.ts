import type { CommandArg, SendOptions } from './redis-streams-connection.js';
import type { StreamCommands } from './redis-streams-commands.js';
import { parseStreams, replyText, type RawEntry } from './redis-streams-replies.js';
import { deliveryCounts } from './redis-streams-upkeep.js';

/**
 * The reader's own connection (a blocking read holds it: TRANSPORTS.md Redis #8), whose blocking read
 * the other connection can end at once (`CLIENT UNBLOCK`, as if it timed out). The unordered reader's
 * `XREADGROUP` and an ordered member's wait for new shard entries both block through it.
 */
export class ReaderConnection {
  #readerId: string | undefined;
  #blocked = false;

  constructor(
    private readonly reader: StreamCommands,
    private readonly commands: StreamCommands,
    private readonly closing: () => boolean,
  ) {}

  /** The connection was lost: its client id is another now. */
  lost(): void {
    this.#readerId = undefined;
  }

  /** Ends a blocking read now. */
  interrupt(): void {
    if (!this.#blocked || this.#readerId === undefined) return;
    this.commands.send(['CLIENT', 'UNBLOCK', this.#readerId], 'CLIENT UNBLOCK').catch(() => undefined);
  }

  /**
   * Sends a blocking command (its deadline extended by `extraMs`, its block time) that {@link interrupt}
   * can end; answers undefined without sending it when the member is closing.
   */
  async block(
    args: readonly CommandArg[],
    what: string,
    options: SendOptions & { extraMs: number },
  ): Promise<unknown> {
    this.#readerId ??= replyText(await this.reader.send(['CLIENT', 'ID'], 'CLIENT ID')) ?? undefined;
    if (this.closing()) return undefined;
    this.#blocked = true;
    try {
      return await this.reader.send(args, what, options);
    } finally {
      this.#blocked = false;
    }
  }
}

/** What a reader needs from its subscription. */
export interface ReaderSite {
  readonly group: string;
  readonly consumer: string;
  /** Topic streams and the group's retry stream. */
  readonly streams: readonly string[];
  readonly blockMs: number;
  /** The subscription's connection generation: entries read across a change are not handed out. */
  generation(): number;
  closing(): boolean;
  /** Takes the entries read; `counts` is absent for new entries (each delivered once so far). */
  accept(stream: string, entries: readonly RawEntry[], counts: ReadonlyMap<string, number> | undefined): void;
}

/**
 * The reads of one member, on a connection of its own (a blocking read holds it: TRANSPORTS.md
 * Redis #8). It first reads the member's own pending entries (`XREADGROUP … 0`: `>` never returns
 * them, TRANSPORTS.md Redis #1), page by page, and then new entries with a blocking read.
 */
export class StreamReader {
  /** Streams whose own pending entries are to be read, from the id after the one given. */
  readonly #history = new Map<string, string>();
  readonly #connection: ReaderConnection;

  constructor(
    private readonly reader: StreamCommands,
    private readonly commands: StreamCommands,
    private readonly site: ReaderSite,
  ) {
    this.#connection = new ReaderConnection(reader, commands, () => site.closing());
    this.rewind();
  }

  /** Reads the member's pending entries again from the start at the next read. */
  rewind(): void {
    for (const stream of this.site.streams) this.#history.set(stream, '0');
  }

  /** The reader's connection was lost: its client id is another now. */
  lost(): void {
    this.#connection.lost();
    this.rewind();
  }

  /** Ends a blocking read now (`CLIENT UNBLOCK`, as if it timed out). */
  interrupt(): void {
    this.#connection.interrupt();
  }

  /** Reads up to `free` entries per stream: pending ones first, else new ones (blocking). */
  read(free: number): Promise<void> {
    return this.#history.size > 0 ? this.#readHistory(free) : this.#readNew(free);
  }

  /** `XREADGROUP GROUP g c COUNT n [options] STREAMS s… id…`. */
  #command(
    count: number,
    options: readonly string[],
    streams: readonly string[],
    from: (stream: string) => string,
  ): string[] {
    const { group, consumer } = this.site;
    return [
      'XREADGROUP',
      'GROUP',
      group,
      consumer,
      'COUNT',
      String(count),
      ...options,
      'STREAMS',
      ...streams,
      ...streams.map(from),
    ];
  }

  async #readNew(free: number): Promise<void> {
    const { streams, blockMs } = this.site;
    const generation = this.site.generation();
    const reply = await this.#connection.block(
      this.#command(free, ['BLOCK', String(blockMs)], streams, () => '>'),
      'a blocking XREADGROUP',
      { bytes: true, extraMs: blockMs },
    );
    // The entries are pending for this consumer whatever happened to the connection meanwhile: after
    // a loss, reading the pending list again hands out each of them once.
    if (generation !== this.site.generation()) return;
    for (const [stream, entries] of parseStreams(reply)) this.site.accept(stream, entries, undefined);
  }

  async #readHistory(free: number): Promise<void> {
    const { group } = this.site;
    const streams = [...this.#history.keys()];
    const generation = this.site.generation();
    const reply = await this.reader.send(
      this.#command(free, [], streams, (stream) => this.#history.get(stream) ?? '0'),
      'reading own pending entries',
      { bytes: true },
    );
    const read = parseStreams(reply);
    for (const stream of streams) {
      if (generation !== this.site.generation()) return;
      const entries = read.get(stream) ?? [];
      const last = entries.at(-1);
      if (last === undefined) {
        this.#history.delete(stream);
        continue;
      }
      this.#history.set(stream, last.id);
      const counts = await deliveryCounts(this.commands, group, stream, entries);
      if (generation === this.site.generation()) this.site.accept(stream, entries, counts);
    }
  }
}
