import { randomUUID } from 'node:crypto';
import { checkOrderingOptions, GateClosedError, OrderingGate } from '../ordered/ordering-gate.js';
import type { Envelope } from '../../core/envelope.js';
import { ConfigError, errorText } from '../../core/errors.js';
import type { Outcome } from '../../core/outcome.js';
import type { DeadLetterCause } from '../dead-letters.js';
import type { Subscription } from '../transport.js';
import {
  replyNumber,
  replyText,
  parseAutoClaim,
  parseStreams,
  type RawEntry,
} from './redis-streams-replies.js';
import { deliveryOf, type Delivery, type DeliverySite } from './redis-streams-delivery.js';
import { deadLetterFields, REPLAY_GROUP_FIELD } from './redis-streams-entry.js';
import { SHARD_SLOTS } from './redis-streams-names.js';
import {
  LEASE,
  ORDERED_ACK,
  ORDERED_DEAD_LETTER,
  ORDERED_READ,
  PARTITIONS,
  RELEASE,
  TAKE_OVER,
} from './redis-streams-ordered-scripts.js';
import { LEAVE, TRIM } from './redis-streams-scripts.js';
import { keepEntryAlive } from './redis-streams-settler.js';
import type { StreamMember } from './redis-streams-subscription.js';
import { ensureGroup } from './redis-streams-topology.js';
import { deliveryCounts } from './redis-streams-upkeep.js';
import { Pause } from '../../core/pause.js';

/** Deliveries waiting in a member's gate, per unit of `concurrency`, before it stops reading. */
export const ORDERED_PENDING_PER_SLOT = 16;

/** A partition this member holds the lease of. */
interface Partition {
  readonly index: number;
  readonly lease: string;
  readonly streams: readonly string[];
  /** Streams whose pending entries are still to be taken over, with the `XAUTOCLAIM` cursor. */
  readonly takeOver: Map<string, string>;
  /** Last entry id of each stream when a read found nothing new: a blocking `XREAD` waits from it. */
  readonly last: Map<string, string>;
}

/** The deliveries read in one generation and the gate that orders them; both end together. */
interface Lane {
  readonly generation: number;
  readonly gate: OrderingGate;
  readonly deliveries: Map<string, Delivery>;
  /** Resolves when the previous lane's running deliveries are settled: this one reads only then. */
  readonly ready: Promise<void>;
}

/** Why a settle was refused: the lease or the entry is no longer this member's. */
class NotOwnerError extends Error {
  override name = 'NotOwnerError' as const;
}

/**
 * One member of an ordered group on Redis Streams. Producers add each message also to one of the
 * topic's 64 shard streams, `stableHash(orderingKey) mod 64`; the group's `partitions` partitions
 * take the shards `n mod partitions`, and a partition is consumed by the member holding its lease
 * (`SET NX PX`, renewed every third of the visibility, released on close, taken by another member
 * when it expires). A new owner first takes over every entry left pending in its shards, in order,
 * then reads new ones. Every read, take-over and settle checks the lease on the server in the same
 * script (the fence), so a member that lost a lease does nothing more with that partition. Deliveries
 * run through an {@link OrderingGate}: one key at a time, retries in place.
 */
export class StreamOrderedSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly consumer: string;
  /** This member's lease token: its consumer name and a value of this run. */
  readonly token: string;
  readonly #member: StreamMember;
  readonly #count: number;
  readonly #leaseMs: number;
  readonly #site: DeliverySite;
  readonly #owned = new Map<number, Partition>();
  readonly #lanes = new Set<Lane>();
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #unlisten: (() => void)[] = [];
  #lane: Lane;
  #generation = 0;
  /** The recorded count this member waits to switch from (`onPartitionChange: 'drain'`). */
  #drainFrom: string | undefined;
  #closing = false;
  #closed: Promise<void> | undefined;
  #loop: Promise<void> | undefined;
  #leaseRound: Promise<void> | undefined;
  readonly #pause = new Pause();
  #readerId: string | undefined;
  #blocked = false;

  constructor(member: StreamMember) {
    this.#member = member;
    this.group = member.group;
    this.topics = member.topics;
    this.consumer = member.options.consumerName;
    this.token = `${this.consumer}/${randomUUID()}`;
    this.#count = member.settings.partitions;
    this.#leaseMs = member.options.visibilityMs;
    checkOrderingOptions(member.ordering ?? {});
    const { keys } = member.settings;
    const topicOf = new Map<string, string>();
    for (const topic of member.topics) {
      for (let slot = 0; slot < SHARD_SLOTS; slot++) topicOf.set(keys.shard(topic, slot), topic);
    }
    this.#site = {
      visibilityMs: member.options.visibilityMs,
      topicOf,
      generation: () => this.#generation,
      keepAlive: (stream, id) => keepEntryAlive(member.commands, member.group, this.consumer, stream, id),
    };
    this.#lane = this.#newLane(Promise.resolve());
  }

  /** The partitions this member holds the leases of now. */
  get partitions(): readonly number[] {
    return [...this.#owned.keys()].sort((a, b) => a - b);
  }

  /** The shard streams of partition `index`, over every topic. */
  #shards(index: number): string[] {
    const { keys } = this.#member.settings;
    const streams: string[] = [];
    for (const topic of this.topics) {
      for (let slot = index; slot < SHARD_SLOTS; slot += this.#count) streams.push(keys.shard(topic, slot));
    }
    return streams;
  }

  #leaseKey(index: number): string {
    return this.#member.settings.keys.lease(this.group, this.#count, index);
  }

  /**
   * Creates the consumer group on every shard stream, marks the topics as having ordered groups (from
   * then on publishes reach the shards), checks the partition count, and starts taking leases.
   */
  async start(): Promise<void> {
    const { commands, reader, settings } = this.#member;
    const { keys } = settings;
    const shards = [...this.#site.topicOf.keys()];
    // An ordered group starts now on the shards (they hold only what came since the topic's first
    // ordered group subscribed), and on its own retry stream from its first entry.
    await ensureGroup(commands, settings.topology, this.group, shards, 'now');
    await ensureGroup(commands, settings.topology, this.group, [keys.retry(this.group)]);
    if (settings.topology === 'create') {
      for (const topic of this.topics) {
        await commands.send(['SADD', keys.orderedGroups(topic), this.group], 'SADD ordered groups');
      }
    }
    await this.#checkCount();
    for (const connection of [reader.connection, commands.connection]) {
      this.#unlisten.push(connection.onLost(() => this.#restart('a connection was lost')));
    }
    const every = (ms: number, round: () => Promise<void>): void => {
      const timer = setInterval(() => {
        void round();
      }, ms);
      timer.unref();
      this.#timers.push(timer);
    };
    every(Math.max(10, Math.floor(this.#leaseMs / 3)), () => this.#leases());
    if (settings.trimEveryMs > 0) every(settings.trimEveryMs, () => this.#trim());
    await this.#leases();
    this.#loop = this.#run();
  }

  /** Records the count, or compares it with the recorded one: refused, or drained first. */
  async #checkCount(): Promise<void> {
    const { commands, settings, ordering } = this.#member;
    const key = settings.keys.partitions(this.group);
    const recorded = replyText(await commands.script(PARTITIONS, [key], [String(this.#count), '']));
    if (recorded === String(this.#count)) return;
    if ((ordering?.onPartitionChange ?? 'refuse') === 'drain') {
      this.#drainFrom = recorded ?? undefined;
      settings.logger.warn(
        'oncemq: the ordered group has another partition count; it is drained before this member starts',
        { group: this.group, recorded, configured: this.#count },
      );
      return;
    }
    throw new ConfigError(
      'partitions',
      `group '${this.group}' is ordered over ${recorded} partitions (recorded in ${key}), and this member is configured with ${this.#count}; ` +
        `configure ${recorded}, or set ordering.onPartitionChange: 'drain' to drain the group and change the count`,
    );
  }

  /**
   * `drain`: records this member's count once no lease of the recorded one is held (the members with
   * the old count closed, or their leases expired). The shards do not change with the count, so
   * nothing moves; the first owners of the new partitions take over what the old ones left pending
   * before they read anything new.
   */
  async #switchCount(from: string): Promise<boolean> {
    const { commands, settings } = this.#member;
    const old = Number(from);
    const leases = Number.isInteger(old)
      ? Array.from({ length: old }, (_, index) => settings.keys.lease(this.group, old, index))
      : [];
    const recorded = replyText(
      await commands.script(
        PARTITIONS,
        [settings.keys.partitions(this.group), ...leases],
        [String(this.#count), from],
      ),
    );
    if (recorded === String(this.#count)) {
      settings.logger.info('oncemq: the ordered group was drained and its partition count recorded', {
        group: this.group,
        from,
        to: this.#count,
      });
      this.#drainFrom = undefined;
      return true;
    }
    this.#drainFrom = recorded ?? undefined;
    return false;
  }

  /** One round over the leases: renews those held, takes free ones; a lease lost restarts the lane. */
  #leases(): Promise<void> {
    this.#leaseRound ??= this.#leaseRoundOnce()
      .catch((error: unknown) => {
        this.#member.settings.logger.warn('oncemq: a lease round failed; it runs again', {
          group: this.group,
          error: errorText(error),
        });
      })
      .finally(() => (this.#leaseRound = undefined));
    return this.#leaseRound;
  }

  async #leaseRoundOnce(): Promise<void> {
    if (this.#closing) return;
    if (this.#drainFrom !== undefined && !(await this.#switchCount(this.#drainFrom))) return;
    const { commands, settings } = this.#member;
    const countKey = settings.keys.partitions(this.group);
    const lost: number[] = [];
    let gained = false;
    for (let index = 0; index < this.#count; index++) {
      if (this.#stopping()) return;
      const lease = this.#leaseKey(index);
      const answer = replyNumber(
        await commands.script(
          LEASE,
          [countKey, lease],
          [String(this.#count), this.token, String(this.#leaseMs)],
        ),
      );
      const held = this.#owned.has(index);
      if (answer === -1) {
        settings.logger.warn('oncemq: the group now has another partition count; this member stops', {
          group: this.group,
          count: this.#count,
        });
        for (const owned of this.#owned.keys()) lost.push(owned);
        break;
      }
      if (held && answer !== 1) lost.push(index);
      else if (!held && answer >= 1) {
        this.#owned.set(index, this.#partition(index, lease));
        gained = true;
      }
    }
    if (lost.length > 0) {
      for (const index of lost) this.#owned.delete(index);
      this.#restart(`lost the lease of partition ${lost.join(', ')}`);
    } else if (gained) this.#interrupt();
  }

  #partition(index: number, lease: string): Partition {
    const streams = this.#shards(index);
    return {
      index,
      lease,
      streams,
      takeOver: new Map(streams.map((stream) => [stream, '0-0'])),
      last: new Map(),
    };
  }

  #newLane(previous: Promise<void>): Lane {
    const deliveries = new Map<string, Delivery>();
    const generation = this.#generation;
    const gate: OrderingGate = new OrderingGate(
      { process: (envelope) => this.#processAndSettle(lane, envelope) },
      {
        ...this.#member.ordering,
        concurrency: this.#member.options.concurrency,
        logger: this.#member.settings.logger,
      },
    );
    const lane: Lane = { generation, gate, deliveries, ready: previous };
    this.#lanes.add(lane);
    return lane;
  }

  /**
   * What was read so far is dropped: the gate closes (deliveries waiting stay pending), the running
   * ones finish, and only then the member takes over its partitions' pending entries again and reads
   * on — so a key's message never runs twice at once in this member.
   */
  #restart(why: string): void {
    if (this.#closing) return;
    this.#member.settings.logger.info('oncemq: an ordered member reads its partitions again', {
      group: this.group,
      why,
    });
    const old = this.#lane;
    old.gate.close();
    // After every earlier lane: a lane restarted twice in a row still waits for the first one's deliveries.
    const drained = Promise.all([old.ready, old.gate.drained()]).then(() => {
      this.#lanes.delete(old);
    });
    this.#generation++;
    for (const [index, partition] of this.#owned)
      this.#owned.set(index, this.#partition(index, partition.lease));
    this.#lane = this.#newLane(drained);
    this.#interrupt();
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#closing) {
      const lane = this.#lane;
      await lane.ready;
      if (lane !== this.#lane || this.#stopping()) continue;
      const room = this.#member.options.concurrency * ORDERED_PENDING_PER_SLOT - lane.gate.pending;
      if (room <= 0 || this.#owned.size === 0) {
        await this.#pause.for(this.#owned.size === 0 ? this.#leaseMs / 3 : Number.POSITIVE_INFINITY);
        continue;
      }
      try {
        let read = false;
        for (const partition of [...this.#owned.values()]) {
          if (lane !== this.#lane) break;
          if (await this.#read(lane, partition, room)) read = true;
        }
        if (!read && lane === this.#lane) await this.#waitForNew();
        failures = 0;
      } catch (error) {
        failures++;
        if (this.#stopping()) break;
        this.#member.settings.logger.warn('oncemq: reading an ordered partition failed; reading again', {
          group: this.group,
          error: errorText(error),
        });
        await this.#pause.for(Math.min(this.#member.settings.failureBackoffMs, 25 * 2 ** failures));
      }
    }
  }

  /** Takes over the partition's pending entries, then reads new ones; true when entries came. */
  async #read(lane: Lane, partition: Partition, room: number): Promise<boolean> {
    const { reader, settings } = this.#member;
    const fixed = [this.token, this.group, this.consumer];
    if (partition.takeOver.size > 0) {
      let read = false;
      for (const [stream, cursor] of partition.takeOver) {
        const reply = await reader.script(
          TAKE_OVER,
          [partition.lease, stream],
          [...fixed, cursor, String(room)],
          { bytes: true },
        );
        if (!this.#fenced(reply, partition)) return false;
        const { next, entries, deleted } = parseAutoClaim((reply as unknown[])[1]);
        if (next === '0-0') partition.takeOver.delete(stream);
        else partition.takeOver.set(stream, next);
        if (deleted.length > 0) {
          settings.logger.error(
            'oncemq: pending entries were deleted from their shard before they were acked: lost',
            {
              group: this.group,
              stream,
              ids: deleted,
            },
          );
        }
        if (entries.length === 0) continue;
        const counts = await deliveryCounts(this.#member.commands, this.group, stream, entries);
        if (lane !== this.#lane) return false;
        this.#submit(lane, stream, entries, counts);
        read = true;
      }
      if (read || partition.takeOver.size > 0) return read;
    }
    const reply = await reader.script(
      ORDERED_READ,
      [partition.lease, ...partition.streams],
      [...fixed, String(room)],
      { bytes: true },
    );
    if (!this.#fenced(reply, partition)) return false;
    const [kind, body] = reply as [unknown, unknown];
    if (replyNumber(kind) === 2) {
      const ids = Array.isArray(body) ? body : [];
      partition.streams.forEach((stream, i) => partition.last.set(stream, replyText(ids[i]) ?? '0-0'));
      return false;
    }
    if (lane !== this.#lane) return false;
    for (const [stream, entries] of parseStreams(body)) this.#submit(lane, stream, entries, undefined);
    return true;
  }

  /** False (and a lease round at once) when a script found the lease gone. */
  #fenced(reply: unknown, partition: Partition): boolean {
    if (Array.isArray(reply) && replyNumber(reply[0]) !== 0) return true;
    this.#member.settings.logger.warn('oncemq: the lease of a partition is no longer this member’s', {
      group: this.group,
      partition: partition.index,
    });
    void this.#leases();
    return false;
  }

  /** Waits on the reader's connection until an owned shard has a new entry, or the block time passes. */
  async #waitForNew(): Promise<void> {
    const { reader, settings } = this.#member;
    const streams: string[] = [];
    const from: string[] = [];
    for (const partition of this.#owned.values()) {
      for (const stream of partition.streams) {
        const last = partition.last.get(stream);
        // Not read yet since it was taken: read first ('$' would miss what came meanwhile).
        if (last === undefined) return;
        streams.push(stream);
        from.push(last);
      }
    }
    if (streams.length === 0) return;
    this.#readerId ??= replyText(await reader.send(['CLIENT', 'ID'], 'CLIENT ID')) ?? undefined;
    if (this.#closing) return;
    this.#blocked = true;
    try {
      await reader.send(
        ['XREAD', 'COUNT', '1', 'BLOCK', String(settings.blockMs), 'STREAMS', ...streams, ...from],
        'a blocking XREAD',
        { extraMs: settings.blockMs },
      );
    } finally {
      this.#blocked = false;
    }
  }

  /** Ends a blocking wait now (`CLIENT UNBLOCK` on the other connection). */
  #interrupt(): void {
    this.#pause.wake();
    if (!this.#blocked || this.#readerId === undefined) return;
    this.#member.commands
      .send(['CLIENT', 'UNBLOCK', this.#readerId], 'CLIENT UNBLOCK')
      .catch(() => undefined);
  }

  #submit(
    lane: Lane,
    stream: string,
    entries: readonly RawEntry[],
    counts: ReadonlyMap<string, number> | undefined,
  ): void {
    for (const entry of entries) {
      if (entry.fields === null) {
        this.#member.settings.logger.error(
          'oncemq: a pending entry was deleted from its shard before it was acked: lost',
          {
            group: this.group,
            stream,
            id: entry.id,
          },
        );
        void this.#settleQuietly(stream, entry.id);
        continue;
      }
      const forGroup = entry.fields.get(REPLAY_GROUP_FIELD);
      if (forGroup !== undefined && Buffer.from(forGroup).toString('utf8') !== this.group) {
        // A dead letter of another ordered group replayed onto the shard: not this group's message.
        void this.#settleQuietly(stream, entry.id);
        continue;
      }
      const delivery = deliveryOf(
        this.#site,
        stream,
        { ...entry, fields: entry.fields },
        counts?.get(entry.id) ?? 1,
      );
      lane.deliveries.set(delivery.slot, delivery);
      lane.gate.submit(delivery.envelope).then(
        () => {
          lane.deliveries.delete(delivery.slot);
          // Room in the gate: a reader paused on a full gate reads again.
          this.#pause.wake();
        },
        (error: unknown) => {
          lane.deliveries.delete(delivery.slot);
          this.#pause.wake();
          // A closed gate leaves the delivery pending: the next owner (or lane) takes it over.
          if (!(error instanceof GateClosedError)) {
            this.#member.settings.logger.error('oncemq: an ordered delivery failed', {
              group: this.group,
              error: errorText(error),
            });
          }
        },
      );
      this.#pause.wake();
    }
  }

  async #settleQuietly(stream: string, id: string): Promise<void> {
    await this.#ack(stream, id).catch(() => undefined);
  }

  /**
   * One attempt through the processor (or, past `maxDeliveries`, a dead letter without one); a final
   * outcome is settled before it is answered, so the key's next message starts only after this one
   * is acked or dead-lettered. A settle refused (lease or entry gone) restarts the lane and throws:
   * the gate is closed by then, and the delivery is left to its owner.
   */
  async #processAndSettle(lane: Lane, envelope: Envelope): Promise<Outcome> {
    const delivery = lane.deliveries.get(envelope.brokerId);
    if (delivery === undefined) throw new GateClosedError('the delivery left its lane');
    const { maxDeliveries } = this.#member.settings;
    const times = envelope.brokerDeliveryCount ?? 1;
    const outcome: Outcome =
      maxDeliveries > 0 && times > maxDeliveries
        ? {
            group: this.group,
            key: null,
            topic: envelope.topic,
            brokerId: envelope.brokerId,
            deliveryCount: envelope.deliveryCount,
            elapsedMs: 0,
            kind: 'dead',
            action: 'dead-letter',
            reason: 'delivery-limit',
            error: new Error(`handed out ${times} times without an outcome (maxDeliveries ${maxDeliveries})`),
          }
        : await this.#member.processor.process(envelope);
    if (outcome.action === 'retry') return outcome;
    try {
      if (outcome.action === 'ack') await this.#ack(delivery.stream, delivery.id);
      else
        await this.#deadLetter(delivery, {
          group: this.group,
          reason: outcome.reason,
          error: outcome.error,
          key: outcome.key,
        });
    } catch (error) {
      if (error instanceof NotOwnerError) this.#restart(error.message);
      throw error;
    }
    return outcome;
  }

  #partitionOf(stream: string): string {
    const slot = Number(stream.slice(stream.lastIndexOf('@') + 1));
    return this.#leaseKey(slot % this.#count);
  }

  async #ack(stream: string, id: string): Promise<void> {
    const done = await this.#member.commands.script(
      ORDERED_ACK,
      [this.#partitionOf(stream), stream],
      [this.token, this.group, this.consumer, id],
    );
    this.#owner(replyNumber(done), `${stream}/${id}`);
  }

  async #deadLetter(delivery: Delivery, cause: DeadLetterCause): Promise<void> {
    const { keys } = this.#member.settings;
    const done = await this.#member.commands.script(
      ORDERED_DEAD_LETTER,
      [this.#partitionOf(delivery.stream), delivery.stream, keys.deadLetters(this.group)],
      [
        this.token,
        this.group,
        this.consumer,
        delivery.id,
        ...deadLetterFields(delivery.envelope, cause, delivery.unread),
      ],
    );
    this.#owner(replyNumber(done), delivery.slot);
  }

  #owner(answer: number, slot: string): void {
    if (answer === 1) return;
    throw new NotOwnerError(
      answer === -1
        ? `settling ${slot}: this member no longer holds its partition's lease`
        : `settling ${slot}: the entry is no longer pending for this member`,
    );
  }

  /** Trims the topic streams and the shards this member reads (never past what any group still needs). */
  async #trim(): Promise<void> {
    const { commands, settings } = this.#member;
    const streams = [
      ...this.topics.map((topic) => settings.keys.topic(topic)),
      ...[...this.#owned.values()].flatMap((partition) => partition.streams),
    ];
    try {
      for (const stream of streams) {
        if (this.#closing) return;
        await commands.script(TRIM, [stream], [String(settings.retentionMs)]);
      }
    } catch (error) {
      settings.logger.warn('oncemq: trimming failed; it runs again', {
        group: this.group,
        error: errorText(error),
      });
    }
  }

  /** Whether close() began (read through a call: it changes while a loop awaits). */
  #stopping(): boolean {
    return this.#closing;
  }

  /**
   * Stops reading, closes the gate (deliveries waiting behind their key or for a retry stay pending),
   * lets the running ones be settled, gives the leases up — the next member takes the partitions over
   * at once, starting with what this one left pending — leaves the group where nothing is pending for
   * it, and closes its connections.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    for (const timer of this.#timers) clearInterval(timer);
    const unblock = setInterval(() => {
      this.#interrupt();
    }, 100);
    this.#interrupt();
    await this.#loop;
    clearInterval(unblock);
    await this.#leaseRound;
    const lanes = [...this.#lanes];
    for (const lane of lanes) lane.gate.close();
    await Promise.all(lanes.map((lane) => lane.gate.drained()));
    const { commands, reader, settings } = this.#member;
    try {
      for (const partition of this.#owned.values()) {
        await commands.script(RELEASE, [partition.lease], [this.token]);
      }
      this.#owned.clear();
      await commands.script(LEAVE, [...this.#site.topicOf.keys()], [this.group, this.consumer]);
    } catch (error) {
      settings.logger.warn('oncemq: could not give up the leases or leave the group; they expire', {
        group: this.group,
        error: errorText(error),
      });
    }
    for (const unlisten of this.#unlisten) unlisten();
    await Promise.all([reader.connection.close(), commands.connection.close()]);
    this.#member.onClosed?.();
  }
}
