import { errorText } from '../../core/errors.js';
import { processAndSettleBatch } from '../settle-batch.js';
import { settle, type DeliveryResult } from '../settler.js';
import type { OrderingOptions, Processor, Subscription } from '../transport.js';
import type { StreamSettings, SubscribeSettings } from './redis-streams-config.js';
import { replyCode, type StreamCommands } from './redis-streams-commands.js';
import {
  deliveryLimitOutcome,
  deliveryOf,
  type Delivery,
  type DeliverySite,
} from './redis-streams-delivery.js';
import { streamBrokerId } from './redis-streams-names.js';
import { StreamReader } from './redis-streams-reader.js';
import type { RawEntry } from './redis-streams-replies.js';
import { LEAVE } from './redis-streams-scripts.js';
import { StreamSettler } from './redis-streams-settler.js';
import { ensureGroup } from './redis-streams-topology.js';
import { StreamUpkeep } from './redis-streams-upkeep.js';
import { Pause } from '../../core/pause.js';

/** What a subscription is opened with. */
export interface StreamMember {
  readonly group: string;
  readonly topics: readonly string[];
  readonly processor: Processor;
  readonly settings: StreamSettings;
  readonly options: SubscribeSettings;
  /** Reads (blocking) on a connection of its own. */
  readonly reader: StreamCommands;
  /** Settles, claims and keeps alive on another. */
  readonly commands: StreamCommands;
  /** Per-key ordering: the member is a {@link StreamOrderedSubscription} instead. */
  readonly ordering?: OrderingOptions;
  /** Called once the subscription is closed. */
  readonly onClosed?: () => void;
}

/**
 * One member of a consumer group on Redis Streams. It reads its own pending entries first (id 0, then
 * `>`: what a previous run with the same consumer name left is handed out at once), reads new entries
 * with a blocking `XREADGROUP` on a connection of its own, claims entries idle past the visibility,
 * and settles each delivery only after its outcome. When either of its connections is lost, the
 * deliveries read before are stale: their settles are dropped and the pending entries read again,
 * so each comes back as a redelivery with the same broker id (a settle sent just before the loss may
 * or may not have landed; reading the pending list tells).
 */
export class StreamSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  /** This member's consumer name in the group's streams: `consumerName`, else host, process id and a counter. */
  readonly consumer: string;
  readonly #member: StreamMember;
  readonly #settler: StreamSettler;
  readonly #upkeep: StreamUpkeep;
  readonly #reader: StreamReader;
  readonly #site: DeliverySite;
  /** Topic streams, then the group's retry stream. */
  readonly #streams: readonly string[];
  /** Entries read or running in this member, by slot: the latest delivery of each. */
  readonly #held = new Map<string, Delivery>();
  readonly #work = new Set<Promise<void>>();
  readonly #unlisten: (() => void)[] = [];
  #queue: Delivery[] = [];
  #running = 0;
  #generation = 0;
  #closing = false;
  #closed: Promise<void> | undefined;
  #loop: Promise<void> | undefined;
  readonly #pause = new Pause();
  #recheck: NodeJS.Timeout | undefined;

  /** @internal made by the transport's `subscribe()` */
  constructor(member: StreamMember) {
    this.#member = member;
    this.group = member.group;
    this.topics = member.topics;
    this.consumer = member.options.consumerName;
    const { keys } = member.settings;
    const topicOf = new Map(member.topics.map((topic) => [keys.topic(topic), topic]));
    this.#streams = [...topicOf.keys(), keys.retry(member.group)];
    this.#settler = new StreamSettler(member.commands, keys, member.group, this.consumer, {
      logger: member.settings.logger,
      retried: (delayMs) => {
        this.#upkeep.promoteIn(delayMs);
      },
      failed: (error) => {
        this.#failed(error);
      },
    });
    this.#site = {
      visibilityMs: member.options.visibilityMs,
      topicOf,
      generation: () => this.#generation,
      keepAlive: (stream, id) => this.#settler.keepAlive(stream, id),
    };
    this.#reader = new StreamReader(member.reader, member.commands, {
      group: member.group,
      consumer: this.consumer,
      streams: this.#streams,
      blockMs: member.settings.blockMs,
      generation: () => this.#generation,
      closing: () => this.#closing,
      accept: (stream, entries, counts) => {
        this.#accept(stream, entries, counts);
      },
    });
    this.#upkeep = new StreamUpkeep(member.commands, {
      group: member.group,
      consumer: this.consumer,
      streams: this.#streams,
      retryStream: keys.retry(member.group),
      delayedKey: keys.delayed(member.group),
      visibilityMs: member.options.visibilityMs,
      retryPollMs: member.settings.retryPollMs,
      retentionMs: member.settings.retentionMs,
      trimEveryMs: member.settings.trimEveryMs,
      logger: member.settings.logger,
      free: () => this.#free(),
      claimed: (stream, entries, counts) => {
        this.#accept(stream, entries, counts, true);
      },
    });
  }

  /** The group's streams exist (or are created), and the member starts with its own pending entries. */
  async start(): Promise<void> {
    const { commands, reader } = this.#member;
    await this.#ensureGroup();
    for (const connection of [reader.connection, commands.connection]) {
      this.#unlisten.push(connection.onLost(this.#lost));
    }
    this.#upkeep.start();
    this.#loop = this.#run();
  }

  /** The group on its topics' streams, starting where it asked, and on its own retry stream from its first entry. */
  async #ensureGroup(): Promise<void> {
    const { commands, settings, options, group } = this.#member;
    const retry = settings.keys.retry(group);
    const topics = this.#streams.filter((stream) => stream !== retry);
    await ensureGroup(commands, settings.topology, group, topics, options.from);
    await ensureGroup(commands, settings.topology, group, [retry]);
  }

  get #batches(): boolean {
    return this.#member.processor.processBatch !== undefined && this.#member.options.batchSize > 1;
  }

  #free(): number {
    return this.#member.options.concurrency - this.#running - this.#queue.length;
  }

  /** A connection was lost: what was read before is stale, and the pending entries are read again. */
  readonly #lost = (): void => {
    if (this.#closed !== undefined) return;
    this.#member.settings.logger.warn(
      'oncemq: a Redis connection was lost; reading the pending entries again',
      {
        group: this.group,
      },
    );
    this.#generation++;
    this.#reader.lost();
    this.#held.clear();
    this.#queue = [];
    this.#pause.wake();
  };

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#closing) {
      this.#dispatch();
      const free = this.#free();
      if (free <= 0) {
        await this.#pause.for(Number.POSITIVE_INFINITY);
        continue;
      }
      try {
        await this.#reader.read(free);
        failures = 0;
      } catch (error) {
        failures++;
        await this.#readFailed(error, failures);
      }
    }
  }

  async #readFailed(error: unknown, failures: number): Promise<void> {
    if (this.#closing) return;
    const { logger, topology } = this.#member.settings;
    if (replyCode(error) === 'NOGROUP' && topology === 'create') {
      logger.warn('oncemq: a stream or consumer group of this subscription was deleted; creating it again', {
        group: this.group,
      });
      await this.#ensureGroup().catch(() => undefined);
    } else {
      logger.warn('oncemq: reading from Redis Streams failed; reading again', {
        group: this.group,
        error: errorText(error),
      });
    }
    await this.#pause.for(Math.min(this.#member.settings.failureBackoffMs, 25 * 2 ** failures));
  }

  /**
   * Queues the entries read, except those this member holds already. An entry this member claimed
   * back from itself (`XAUTOCLAIM`: its handler ran past the visibility without keeping it alive) is
   * handed out again, as another member would have been: the running delivery is superseded and its
   * settle dropped.
   */
  #accept(
    stream: string,
    entries: readonly RawEntry[],
    counts: ReadonlyMap<string, number> | undefined,
    claimed = false,
  ): void {
    const { maxDeliveries, logger } = this.#member.settings;
    for (const entry of entries) {
      const slot = streamBrokerId(stream, entry.id);
      const held = this.#held.get(slot);
      if (held !== undefined && (!claimed || this.#queue.includes(held))) continue;
      if (entry.fields === null) {
        logger.error('oncemq: a pending entry was deleted from its stream before it was acked: lost', {
          group: this.group,
          stream,
          id: entry.id,
        });
        this.#track(this.#settler.ackEntry(stream, entry.id));
        continue;
      }
      const delivery = deliveryOf(
        this.#site,
        stream,
        { ...entry, fields: entry.fields },
        counts?.get(entry.id) ?? 1,
      );
      const overLimit = deliveryLimitOutcome(this.group, delivery.envelope, maxDeliveries);
      if (overLimit !== undefined) {
        this.#held.set(slot, delivery);
        this.#track(
          this.#settle(delivery, { outcome: overLimit }).finally(() => {
            this.#release(delivery);
          }),
        );
        continue;
      }
      this.#held.set(slot, delivery);
      this.#queue.push(delivery);
    }
    this.#dispatch();
  }

  #dispatch(): void {
    const { concurrency, batchSize } = this.#member.options;
    while (this.#queue.length > 0 && this.#running < concurrency) {
      const room = concurrency - this.#running;
      const taken = this.#queue.splice(0, this.#batches ? Math.min(batchSize, room) : 1);
      this.#running += taken.length;
      this.#track(this.#process(taken));
    }
  }

  async #process(deliveries: readonly Delivery[]): Promise<void> {
    const { processor } = this.#member;
    try {
      if (this.#batches && processor.processBatch !== undefined) {
        await processAndSettleBatch(
          processor.processBatch.bind(processor),
          deliveries.map((delivery) => ({
            envelope: delivery.envelope,
            settle: (result: DeliveryResult) => this.#settle(delivery, result),
          })),
        );
        return;
      }
      const delivery = deliveries[0] as Delivery;
      let result: DeliveryResult;
      try {
        result = { outcome: await processor.process(delivery.envelope) };
      } catch (error) {
        result = { error };
      }
      await this.#settle(delivery, result);
    } finally {
      this.#running -= deliveries.length;
      for (const delivery of deliveries) this.#release(delivery);
      this.#pause.wake();
    }
  }

  /**
   * Settles a delivery with its result through the settler, unless the delivery is stale: a
   * connection was lost since it was read, or a later delivery of its entry superseded it.
   */
  async #settle(delivery: Delivery, result: DeliveryResult): Promise<void> {
    const { logger } = this.#member.settings;
    const fields = { group: this.group, brokerId: delivery.slot };
    if (this.#held.get(delivery.slot) !== delivery) {
      logger.debug(
        'oncemq: this delivery is stale (a connection was lost, or it was handed out again)',
        fields,
      );
      return;
    }
    try {
      await settle(this.#settler, delivery, result);
    } catch (error) {
      logger.warn('oncemq: settling a delivery failed; it stays pending and comes again', {
        ...fields,
        error: errorText(error),
      });
      this.#readPendingLater();
    }
  }

  /** The processor threw (not the message's fault): nothing is settled, the copies come again, not charged. */
  #failed(error: unknown): void {
    this.#member.settings.logger.error('oncemq: the processor threw; the delivery stays pending', {
      group: this.group,
      error: errorText(error),
    });
    this.#readPendingLater();
  }

  /** After the failure backoff (never a hot loop), reads this member's pending entries again. */
  #readPendingLater(): void {
    if (this.#recheck !== undefined || this.#closing) return;
    this.#recheck = setTimeout(() => {
      this.#recheck = undefined;
      this.#reader.rewind();
      this.#reader.interrupt();
      this.#pause.wake();
    }, this.#member.settings.failureBackoffMs);
    this.#recheck.unref();
  }

  #release(delivery: Delivery): void {
    if (this.#held.get(delivery.slot) === delivery) this.#held.delete(delivery.slot);
  }

  #track(work: Promise<void>): void {
    const tracked = work.catch((error: unknown) => {
      this.#member.settings.logger.warn('oncemq: a Redis Streams settle failed; the entry stays pending', {
        group: this.group,
        error: errorText(error),
      });
    });
    this.#work.add(tracked);
    void tracked.finally(() => this.#work.delete(tracked));
  }

  /**
   * Stops reading, lets the deliveries read so far reach their outcome and be settled, removes this
   * consumer from the group where nothing is pending for it, and closes its connections.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    clearTimeout(this.#recheck);
    this.#pause.wake();
    // CLIENT UNBLOCK travels on the other connection and may overtake the read it is meant to end.
    const unblock = setInterval(() => {
      this.#reader.interrupt();
    }, 100);
    this.#reader.interrupt();
    await this.#loop;
    clearInterval(unblock);
    await this.#upkeep.stop();
    while (this.#queue.length > 0 || this.#work.size > 0) {
      this.#dispatch();
      await Promise.all(this.#work);
    }
    const { commands, reader, settings } = this.#member;
    try {
      await commands.script(LEAVE, this.#streams, [this.group, this.consumer]);
    } catch (error) {
      settings.logger.warn('oncemq: could not leave the consumer group', {
        group: this.group,
        error: errorText(error),
      });
    }
    for (const unlisten of this.#unlisten) unlisten();
    await Promise.all([reader.connection.close(), commands.connection.close()]);
    this.#member.onClosed?.();
  }
}
