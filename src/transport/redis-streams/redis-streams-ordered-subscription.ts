import { randomUUID } from 'node:crypto';
import type { Envelope } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { Outcome } from '../../core/outcome.js';
import { Pause } from '../../core/pause.js';
import { OrderedLane, settleBeforeAnswer } from '../ordered/ordered-lane.js';
import { GateClosedError } from '../ordered/ordering-gate.js';
import { PartitionLeases } from '../ordered/partition-leases.js';
import { settleOutcome, type FinalOutcome } from '../settler.js';
import type { Subscription } from '../transport.js';
import {
  deliveryLimitOutcome,
  deliveryOf,
  type Delivery,
  type DeliverySite,
} from './redis-streams-delivery.js';
import { SHARD_SLOTS } from './redis-streams-names.js';
import { StreamPartitionCount } from './redis-streams-partition-count.js';
import { StreamLeaseStore } from './redis-streams-partition-leases.js';
import { NotOwnerError, StreamPartitions, type ReadEntry } from './redis-streams-partitions.js';
import { ReaderConnection } from './redis-streams-reader.js';
import { LEAVE, TRIM } from './redis-streams-scripts.js';
import { FencedStreamSettler, keepEntryAlive } from './redis-streams-settler.js';
import type { StreamMember } from './redis-streams-subscription.js';
import { ensureGroup } from './redis-streams-topology.js';

/** Deliveries waiting in a member's gate, per unit of `concurrency`, before it stops reading. */
export const ORDERED_PENDING_PER_SLOT = 16;

/** The deliveries read in one generation, in their ordered lane; both end together. */
interface StreamLane {
  readonly generation: number;
  readonly lane: OrderedLane<Delivery>;
  /** Resolves when the previous lane's running deliveries are settled: this one reads only then. */
  readonly ready: Promise<void>;
}

/**
 * One member of an ordered group on Redis Streams. Producers add each message also to one of the
 * topic's 64 shard streams, `stableHash(orderingKey) mod 64`; the group's `partitions` partitions
 * take the shards `n mod partitions`, and a partition is consumed by the member holding its lease
 * ({@link PartitionLeases} over `SET NX PX` keys, released on close, taken by another member when it
 * expires). A new owner first takes over every entry left pending in its shards, in order, then reads
 * new ones. Every read, take-over and settle checks the lease on the server in the same script (the
 * fence), so a member that lost a lease does nothing more with that partition. Deliveries run through
 * an {@link OrderedLane}: one key at a time, retries in place, a final outcome settled before the
 * key's next message starts.
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
  readonly #connection: ReaderConnection;
  readonly #partitions: StreamPartitions;
  readonly #settler: FencedStreamSettler;
  readonly #counts: StreamPartitionCount;
  readonly #leases: PartitionLeases<undefined>;
  readonly #lanes = new Set<StreamLane>();
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #unlisten: (() => void)[] = [];
  readonly #pause = new Pause();
  #lane: StreamLane;
  #generation = 0;
  /** Partitions lost in this turn of the event loop: the lane restarts once for all of them. */
  #lost: number[] = [];
  #round: Promise<void> | undefined;
  #closing = false;
  #closed: Promise<void> | undefined;
  #loop: Promise<void> | undefined;

  constructor(member: StreamMember) {
    this.#member = member;
    this.group = member.group;
    this.topics = member.topics;
    this.consumer = member.options.consumerName;
    this.token = `${this.consumer}/${randomUUID()}`;
    this.#count = member.settings.partitions;
    this.#leaseMs = member.options.visibilityMs;
    const { keys, logger, blockMs } = member.settings;
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
    const lease = (index: number): string => keys.lease(this.group, this.#count, index);
    this.#connection = new ReaderConnection(member.reader, member.commands, () => this.#closing);
    this.#partitions = new StreamPartitions(member.reader, member.commands, this.#connection, {
      keys,
      group: this.group,
      consumer: this.consumer,
      topics: this.topics,
      count: this.#count,
      token: this.token,
      blockMs,
      logger,
      lease,
      accept: (stream, entries, counts) => {
        this.#accept(this.#lane, stream, entries, counts);
      },
      fenced: () => void this.#roundNow(),
    });
    this.#settler = new FencedStreamSettler(this.#partitions, this.group);
    this.#counts = new StreamPartitionCount(member.commands, keys, this.group, logger);
    const store = new StreamLeaseStore(member.commands, {
      keys,
      group: this.group,
      count: this.#count,
      token: this.token,
      leaseMs: this.#leaseMs,
      logger,
      counted: () => this.#counts.counted(this.#count),
    });
    this.#leases = new PartitionLeases(
      store,
      {
        taken: (index) => {
          // Two rounds at once (one a script's fence asked for) may both take a partition.
          if (this.#partitions.has(index)) return;
          this.#partitions.take(index);
          this.#interrupt();
        },
        lost: (index, why) => {
          this.#partitions.drop(index);
          this.#lose(index, why);
        },
      },
      {
        count: this.#count,
        leaseMs: this.#leaseMs,
        logger,
        group: this.group,
        beforeRound: () => Promise.resolve({ go: !this.#closing }),
      },
    );
    this.#lane = this.#newLane(Promise.resolve());
  }

  /** The partitions this member holds the leases of now. */
  get partitions(): readonly number[] {
    return this.#partitions.indexes;
  }

  /**
   * Creates the consumer group on every shard stream, marks the topics as having ordered groups (from
   * then on publishes reach the shards), checks the partition count, and starts taking leases.
   */
  async start(): Promise<void> {
    const { commands, reader, settings } = this.#member;
    const { keys } = settings;
    // An ordered group starts now on the shards (they hold only what came since the topic's first
    // ordered group subscribed), and on its own retry stream from its first entry.
    await ensureGroup(commands, settings.topology, this.group, [...this.#site.topicOf.keys()], 'now');
    await ensureGroup(commands, settings.topology, this.group, [keys.retry(this.group)]);
    if (settings.topology === 'create') {
      for (const topic of this.topics) {
        await commands.send(['SADD', keys.orderedGroups(topic), this.group], 'SADD ordered groups');
      }
    }
    await this.#counts.check({
      group: this.group,
      count: this.#count,
      ordering: this.#member.ordering,
      docs: 'docs/transports/redis-streams.md',
    });
    for (const connection of [reader.connection, commands.connection]) {
      this.#unlisten.push(
        connection.onLost(() => {
          if (connection === reader.connection) this.#connection.lost();
          this.#restart('a connection was lost');
        }),
      );
    }
    await this.#leases.start();
    if (settings.trimEveryMs > 0) {
      const timer = setInterval(() => void this.#trim(), settings.trimEveryMs);
      timer.unref();
      this.#timers.push(timer);
    }
    this.#loop = this.#run();
  }

  /** A lease round at once (a script found a lease gone), one at a time. */
  #roundNow(): Promise<void> {
    this.#round ??= this.#leases
      .round()
      .catch((error: unknown) => {
        this.#member.settings.logger.warn('oncemq: a lease round failed; it runs again', {
          group: this.group,
          error: errorText(error),
        });
      })
      .finally(() => (this.#round = undefined));
    return this.#round;
  }

  /** A partition was let go: the lane restarts once for every partition let go in this turn. */
  #lose(index: number, why: string): void {
    this.#lost.push(index);
    if (this.#lost.length > 1) return;
    queueMicrotask(() => {
      const lost = this.#lost;
      this.#lost = [];
      this.#restart(`lost the lease of partition ${lost.join(', ')} (${why})`);
    });
  }

  #newLane(previous: Promise<void>): StreamLane {
    const { ordering, options, settings } = this.#member;
    const lane: StreamLane = {
      generation: this.#generation,
      ready: previous,
      lane: new OrderedLane<Delivery>({
        ordering: ordering ?? {},
        concurrency: options.concurrency,
        logger: settings.logger,
        attempt: (held, envelope) => this.#attempt(held, envelope),
        // Room in the gate: a reader paused on a full gate reads again.
        left: () => this.#pause.wake(),
      }),
    };
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
    old.lane.close();
    // After every earlier lane: a lane restarted twice in a row still waits for the first one's deliveries.
    const drained = Promise.all([old.ready, old.lane.drained()]).then(() => {
      this.#lanes.delete(old);
    });
    this.#generation++;
    this.#partitions.reset();
    this.#lane = this.#newLane(drained);
    this.#interrupt();
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#closing) {
      const lane = this.#lane;
      await lane.ready;
      if (lane !== this.#lane || this.#stopping()) continue;
      const room = this.#member.options.concurrency * ORDERED_PENDING_PER_SLOT - lane.lane.gate.pending;
      if (room <= 0 || this.#partitions.size === 0) {
        await this.#pause.for(this.#partitions.size === 0 ? this.#leaseMs / 3 : Number.POSITIVE_INFINITY);
        continue;
      }
      try {
        await this.#partitions.read(room, () => lane === this.#lane);
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

  /** Ends a blocking wait now (`CLIENT UNBLOCK` on the other connection). */
  #interrupt(): void {
    this.#pause.wake();
    this.#connection.interrupt();
  }

  /** Hands the entries read to `lane`: each runs through its gate, in order of its key. */
  #accept(
    lane: StreamLane,
    stream: string,
    entries: readonly ReadEntry[],
    counts: ReadonlyMap<string, number> | undefined,
  ): void {
    const { logger } = this.#member.settings;
    for (const entry of entries) {
      const delivery = deliveryOf(this.#site, stream, entry, counts?.get(entry.id) ?? 1);
      // A closed gate leaves the delivery pending: the next owner (or lane) takes it over.
      lane.lane.submit(delivery.envelope, delivery, (error) => {
        logger.error('oncemq: an ordered delivery failed', { group: this.group, error: errorText(error) });
      });
      this.#pause.wake();
    }
  }

  /**
   * One attempt through the processor (or, past `maxDeliveries`, a dead letter without one), ended by
   * {@link settleBeforeAnswer}. A settle refused (lease or entry gone) restarts the lane and throws:
   * the gate is closed by then, and the delivery is left to its owner.
   */
  async #attempt(lane: OrderedLane<Delivery>, envelope: Envelope): Promise<Outcome> {
    const delivery = lane.current(envelope.brokerId);
    if (delivery === undefined) throw new GateClosedError('the delivery left its lane');
    const outcome =
      deliveryLimitOutcome(this.group, envelope, this.#member.settings.maxDeliveries) ??
      (await this.#member.processor.process(envelope));
    return settleBeforeAnswer(lane.gate, outcome, delivery, (held, final) => this.#settleFinal(held, final));
  }

  async #settleFinal(delivery: Delivery, outcome: FinalOutcome): Promise<void> {
    try {
      await settleOutcome(this.#settler, delivery, outcome);
    } catch (error) {
      if (error instanceof NotOwnerError) this.#restart(error.message);
      throw error;
    }
  }

  /** Trims the topic streams and the shards this member reads (never past what any group still needs). */
  async #trim(): Promise<void> {
    const { commands, settings } = this.#member;
    const streams = [...this.topics.map((topic) => settings.keys.topic(topic)), ...this.#partitions.streams];
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
    await this.#leases.stop();
    await this.#round;
    const lanes = [...this.#lanes];
    for (const { lane } of lanes) lane.close();
    await Promise.all(lanes.map(({ lane }) => lane.drained()));
    const { commands, reader, settings } = this.#member;
    try {
      for (const index of [...this.#leases.held]) {
        await this.#leases.release(index, true);
        this.#partitions.drop(index);
      }
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
