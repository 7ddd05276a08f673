import { randomUUID } from 'node:crypto';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { errorText, TransportUnavailableError } from '../../core/errors.js';
import type { LeaseRound, LeaseStore } from '../ordered/partition-leases.js';
import type { NatsSettings } from './nats-config.js';
import type { NatsDriver } from './nats-driver.js';
import { leaseStream } from './nats-names.js';

/** Header of a lease entry: `held` by its owner, or `released` once the owner left everything settled or handed back. */
export const LEASE_STATE_HEADER = 'oncemq-lease';

/** How the previous owner of a partition left it, as the new owner finds it. */
export type LeasePredecessor =
  /** Nobody held it, or its owner released it with every delivery settled or handed back. */
  | 'clean'
  /** Its lease ran out, or its owner left deliveries the server still counts as pending to it. */
  | 'unclean';

/** What a lease needs from the open transport. */
export interface LeaseParts {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly driver: NatsDriver;
  readonly settings: NatsSettings;
}

/**
 * Ownership of one partition of an ordered group, kept in the lease stream (JetStream 2.9 has no
 * single active consumer). The last entry on the partition's subject names the owner; every write
 * expects the subject's last sequence it read (`Nats-Expected-Last-Subject-Sequence`), so two
 * members never both succeed, and an entry not renewed within the stream's `max_age` is removed by
 * the server, which frees the partition.
 */
export class PartitionLease {
  readonly subject: string;
  readonly #parts: LeaseParts;
  readonly #token = randomUUID();
  /** The sequence of our own last entry, while we hold the lease. */
  #seq: number | undefined;

  constructor(parts: LeaseParts, subject: string) {
    this.#parts = parts;
    this.subject = subject;
  }

  holds(): boolean {
    return this.#seq !== undefined;
  }

  /** Takes the lease when nobody holds it; answers how the previous owner left, or null when it is held. */
  async acquire(): Promise<LeasePredecessor | null> {
    const last = await this.#last();
    if (last !== null && last.state === 'held') return null;
    const seq = await this.#write('held', last?.seq ?? 0);
    if (seq === null) return null;
    this.#seq = seq;
    return last?.state === 'released' ? 'clean' : 'unclean';
  }

  /** Renews the lease; false when it is no longer ours (it ran out and another member took it, or it is gone). */
  async renew(): Promise<boolean> {
    if (this.#seq === undefined) return false;
    const seq = await this.#write('held', this.#seq);
    this.#seq = seq ?? undefined;
    return seq !== null;
  }

  /** Gives the lease up; `clean` tells the next owner that nothing of ours is left pending. */
  async release(clean: boolean): Promise<void> {
    if (this.#seq === undefined) return;
    const seq = this.#seq;
    this.#seq = undefined;
    await this.#write(clean ? 'released' : 'dirty', seq).catch((error: unknown) => {
      this.#parts.settings.logger.warn('oncemq: could not release a NATS partition lease; it runs out', {
        subject: this.subject,
        error: errorText(error),
      });
    });
  }

  async #last(): Promise<{ readonly seq: number; readonly state: string } | null> {
    try {
      const message = await this.#parts.jsm.streams.getMessage(leaseStream(this.#parts.settings), {
        last_by_subj: this.subject,
      });
      if (message === null) return null;
      return { seq: message.seq, state: message.header.get(LEASE_STATE_HEADER) };
    } catch (error) {
      if ((error as Error).message.includes('no message found')) return null;
      throw new TransportUnavailableError(`NATS: reading lease ${this.subject} failed: ${errorText(error)}`, {
        cause: error,
      });
    }
  }

  /** Writes an entry expecting `after` as the subject's last sequence; null when another entry came first. */
  async #write(state: 'held' | 'released' | 'dirty', after: number): Promise<number | null> {
    const headers = this.#parts.driver.headers();
    headers.set(LEASE_STATE_HEADER, state);
    try {
      const ack = await this.#parts.js.publish(this.subject, this.#token, {
        headers,
        expect: { lastSubjectSequence: after },
        timeout: this.#parts.settings.requestTimeoutMs,
      });
      return ack.seq;
    } catch (error) {
      if (/wrong last sequence/i.test(errorText(error))) return null;
      throw new TransportUnavailableError(`NATS: writing lease ${this.subject} failed: ${errorText(error)}`, {
        cause: error,
      });
    }
  }
}

/** What the lease store asks of its member. */
export interface NatsLeaseMember {
  /** False until the member read its group's count record once. */
  readonly ready: () => boolean;
  /** True while the partition's lane is still stopping. */
  readonly stopping: (index: number) => boolean;
  /** Logs a lease write or read that failed. */
  readonly warn: (index: number, error: unknown) => void;
}

/**
 * The leases of one ordered member's partitions, one {@link PartitionLease} per partition, as the
 * shared `PartitionLeases` rounds use them. A write that fails is logged and answers nothing for its
 * partition (the watchdog lets it go if that lasts). A partition still stopping (`stopping`) is not
 * taken again, while its lease is renewed until it is released: another member takes it only once
 * what ran in it is settled.
 */
export class NatsLeaseStore implements LeaseStore<LeasePredecessor> {
  readonly #leases: readonly PartitionLease[];
  readonly #member: NatsLeaseMember;

  constructor(leases: readonly PartitionLease[], member: NatsLeaseMember) {
    this.#leases = leases;
    this.#member = member;
  }

  async round(held: readonly number[], free: readonly number[]): Promise<LeaseRound<LeasePredecessor>> {
    const renewed: number[] = [];
    // Nothing is taken before the member read its group's count record once (nothing is held then).
    if (!this.#member.ready()) return { renewed, lost: [], taken: [] };
    const lost: number[] = [];
    const taken: { index: number; predecessor: LeasePredecessor }[] = [];
    const each = async (index: number, work: (lease: PartitionLease) => Promise<void>): Promise<void> => {
      const lease = this.#leases[index];
      if (lease === undefined) return;
      try {
        await work(lease);
      } catch (error) {
        this.#member.warn(index, error);
      }
    };
    await Promise.all([
      ...held.map((index) =>
        each(index, async (lease) => {
          ((await lease.renew()) ? renewed : lost).push(index);
        }),
      ),
      ...free.map((index) =>
        each(index, async (lease) => {
          if (this.#member.stopping(index)) {
            if (lease.holds()) await lease.renew();
            return;
          }
          const predecessor = await lease.acquire();
          if (predecessor !== null) taken.push({ index, predecessor });
        }),
      ),
    ]);
    return { renewed, lost, taken };
  }

  async release(index: number, clean: boolean): Promise<void> {
    await this.#leases[index]?.release(clean);
  }
}
