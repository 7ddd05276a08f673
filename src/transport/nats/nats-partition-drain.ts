import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { ConfigError, errorText } from '../../core/errors.js';
import type { Subscription } from '../transport.js';
import type { NatsSettings } from './nats-config.js';
import { partitionConsumer } from './nats-names.js';
import type { NatsOrderedSubscription } from './nats-ordered-subscription.js';
import {
  readOrderingRecord,
  recordDrainDone,
  type OrderingRecord,
  type PartitionDrain,
} from './nats-partition-count.js';
import { isNotFound } from './nats-topology.js';
import { Pause } from '../../core/pause.js';

/** A count record that says a drain runs. */
export type DrainRecord = OrderingRecord & { readonly drain: PartitionDrain };

/** What a member moving its group to a new partition count is made of. */
export interface NatsDrainParts {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly settings: NatsSettings;
  /** The drain as this member recorded or found it. */
  readonly record: DrainRecord;
  /** When this member (or its read) first saw the drain recorded: it finishes it a lease later at the earliest. */
  readonly seenAt: number;
  /** This member on the old count: it runs what came before the switch, with the members still on it. */
  readonly old: NatsOrderedSubscription;
  /** Starts this member on the new count, once the old count's consumers are drained and deleted. */
  readonly startNew: () => Promise<NatsOrderedSubscription>;
}

/**
 * A member of an ordered group moving from one partition count to another
 * (`ordering.onPartitionChange: 'drain'`). The switch recorded, for each topic stream, the last
 * sequence S: the old count's consumers run the messages up to S (any member may lease an old
 * partition, old or new count, and none runs a message after S), the new count's consumers start
 * after S and are not pulled from before every old consumer has nothing pending at or below S.
 * Then the old consumers are deleted, the record says the drain is finished, and this member
 * consumes the new partitions. Any member on the new count finishes the drain, so a drain whose
 * first member crashed is finished by another.
 */
export class NatsDrainingSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly #parts: NatsDrainParts;
  #current: NatsOrderedSubscription;
  #drained = false;
  #running = true;
  #loop: Promise<void> | undefined;
  readonly #pause = new Pause();
  #closed: Promise<void> | undefined;
  /** Why the member stopped by itself: the count record changed under the drain. */
  failure: Error | undefined;
  /** Called once closed (the transport forgets it). */
  onClose: () => void = () => undefined;

  constructor(group: string, topics: readonly string[], parts: NatsDrainParts) {
    this.group = group;
    this.topics = Object.freeze([...topics]);
    this.#parts = parts;
    this.#current = parts.old;
  }

  /** True until this member consumes the new count's partitions. */
  get draining(): boolean {
    return !this.#drained;
  }

  /** Partitions this member owns now: of the old count while it drains, of the new one after. */
  get owned(): readonly number[] {
    return this.#current.owned;
  }

  start(): void {
    this.#loop = this.#run();
  }

  #isRunning(): boolean {
    return this.#running;
  }

  async #run(): Promise<void> {
    const { settings } = this.#parts;
    const everyMs = Math.max(100, Math.floor(settings.partitionLeaseMs / 3));
    while (this.#isRunning()) {
      try {
        if (await this.#step()) return;
      } catch (error) {
        settings.logger.warn('oncemq: a NATS partition drain could not be checked; trying again', {
          group: this.group,
          error: errorText(error),
        });
      }
      await this.#pause.for(everyMs);
    }
  }

  /** One look at the drain; true once this member consumes the new count (or stopped). */
  async #step(): Promise<boolean> {
    const { record, settings } = this.#parts;
    const now = await readOrderingRecord(this.#parts, this.group);
    if (now === null || now.count !== record.count || (now.drain !== undefined && now.seq !== record.seq)) {
      this.failure = new ConfigError(
        'partitions',
        `the partition count record of group '${this.group}' changed during its drain to ${record.count} ` +
          `partitions (it now says ${now === null ? 'nothing' : String(now.count)}); this member stopped`,
      );
      settings.logger.error('oncemq: a NATS ordered member stopped', {
        group: this.group,
        error: this.failure.message,
      });
      void this.close();
      return true;
    }
    if (now.drain === undefined) {
      await this.#switchOver();
      return true;
    }
    // A member on the old count that read the record before the switch may pull until two thirds of
    // a lease after that read; what such a pull brings is pending (and seen below) until settled.
    if (Date.now() < this.#parts.seenAt + settings.partitionLeaseMs) return false;
    if (!(await this.#oldDrained())) return false;
    await this.#parts.old.close();
    await this.#deleteOld();
    if (await recordDrainDone(this.#parts, this.group, record)) {
      settings.logger.info('oncemq: drained the old partitions of a NATS ordered group', {
        group: this.group,
        from: record.drain.from,
        to: record.count,
      });
      await this.#switchOver();
      return true;
    }
    return false;
  }

  /** The old count's consumers of every topic stream of the drain. */
  #oldConsumers(): { readonly stream: string; readonly name: string; readonly bound: number }[] {
    const { drain } = this.#parts.record;
    return Object.entries(drain.bounds).flatMap(([stream, bound]) =>
      Array.from({ length: drain.from }, (_, index) => ({
        stream,
        name: partitionConsumer(this.group, index, drain.from),
        bound,
      })),
    );
  }

  /**
   * True when no old consumer has anything at or below its stream's bound left to deliver or
   * settle: nothing pending an ack, and its first deliveries (in stream order) past the bound or
   * at the end of what it matches.
   */
  async #oldDrained(): Promise<boolean> {
    for (const { stream, name, bound } of this.#oldConsumers()) {
      try {
        const info = await this.#parts.jsm.consumers.info(stream, name);
        if (info.num_ack_pending > 0) return false;
        if (info.num_pending > 0 && info.delivered.stream_seq < bound) return false;
      } catch (error) {
        if (!isNotFound(error, 'consumer') && !isNotFound(error, 'stream')) throw error;
      }
    }
    return true;
  }

  async #deleteOld(): Promise<void> {
    for (const { stream, name } of this.#oldConsumers()) {
      try {
        await this.#parts.jsm.consumers.delete(stream, name);
      } catch (error) {
        if (!isNotFound(error, 'consumer') && !isNotFound(error, 'stream')) throw error;
      }
    }
  }

  async #switchOver(): Promise<void> {
    await this.#parts.old.close();
    if (!this.#isRunning()) return;
    this.#current = await this.#parts.startNew();
    this.#drained = true;
    if (!this.#isRunning()) await this.#current.close();
  }

  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#running = false;
    this.#pause.wake();
    await this.#loop;
    await this.#parts.old.close();
    await this.#current.close();
    this.onClose();
  }
}
