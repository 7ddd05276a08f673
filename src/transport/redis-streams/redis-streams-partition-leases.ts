import type { Logger } from '../../core/logger.js';
import type { LeaseRound, LeaseStore } from '../ordered/partition-leases.js';
import type { StreamCommands } from './redis-streams-commands.js';
import type { StreamKeys } from './redis-streams-names.js';
import { LEASES, RELEASE } from './redis-streams-ordered-scripts.js';
import { replyNumber } from './redis-streams-replies.js';

/** What a {@link StreamLeaseStore} is built with. */
export interface StreamLeaseSite {
  readonly keys: StreamKeys;
  readonly group: string;
  /** The member's partition count: the leases are those of this count. */
  readonly count: number;
  /** The member's lease token (the value of every lease it holds). */
  readonly token: string;
  readonly leaseMs: number;
  readonly logger: Logger;
  /** False while the group drains from another count: a round then renews and takes nothing. */
  counted(): Promise<boolean>;
}

const NOTHING: LeaseRound<undefined> = Object.freeze({ renewed: [], lost: [], taken: [] });

/**
 * The leases of an ordered group's partitions as Redis keys, `<prefix>:lease:<group>@<count>.<index>`,
 * each holding its member's token with a `PX` expiry. A round is one `LEASES` script call: it checks
 * that the group's recorded count is still this member's, then renews the leases held and takes
 * (`SET … PX`) the free ones. A lease's expiry is the whole lease; `PartitionLeases` lets a partition
 * go before it can run out.
 */
export class StreamLeaseStore implements LeaseStore<undefined> {
  constructor(
    private readonly commands: StreamCommands,
    private readonly site: StreamLeaseSite,
  ) {}

  /** The key of partition `index`'s lease. */
  lease(index: number): string {
    const { keys, group, count } = this.site;
    return keys.lease(group, count, index);
  }

  /** Renews the `held` leases and takes the `free` ones not held by another member, in one script. */
  async round(held: readonly number[], free: readonly number[]): Promise<LeaseRound<undefined>> {
    const { keys, group, count, token, leaseMs, logger } = this.site;
    if (!(await this.site.counted())) return NOTHING;
    const indexes = [...held, ...free];
    const reply = await this.commands.script(
      LEASES,
      [keys.partitions(group), ...indexes.map((index) => this.lease(index))],
      [String(count), token, String(leaseMs)],
    );
    if (!Array.isArray(reply)) {
      logger.warn('oncemq: the group now has another partition count; this member stops', {
        group,
        count,
      });
      return { renewed: [], lost: [...held], taken: [] };
    }
    const answers = reply.map((answer) => replyNumber(answer));
    const renewed: number[] = [];
    const lost: number[] = [];
    const taken: { index: number; predecessor: undefined }[] = [];
    held.forEach((index, i) => (answers[i] === 1 ? renewed : lost).push(index));
    free.forEach((index, i) => {
      if ((answers[held.length + i] ?? 0) >= 1) taken.push({ index, predecessor: undefined });
    });
    return { renewed, lost, taken };
  }

  /** Gives the lease up when this member still holds it. */
  async release(index: number): Promise<void> {
    await this.commands.script(RELEASE, [this.lease(index)], [this.site.token]);
  }
}
