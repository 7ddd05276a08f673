import type { Claim, ClaimRequest, ClaimResult } from './ledger.js';
import type { LeasedClaims } from './ledger-backend.js';

/** The owner-checked writes of a leased claim. */
export type OwnedWrite = 'renew' | 'complete' | 'fail' | 'release';

/** What each owner-checked write is doing, for error messages. */
export const OWNED_WRITE_DOING: Readonly<Record<OwnedWrite, string>> = Object.freeze({
  renew: 'renewing a lease',
  complete: 'completing',
  fail: 'marking a failure',
  release: 'releasing',
});

/**
 * The statements of the owner-checked writes on one SQL table, placeholders numbered in text order.
 * Each binds its own values first, then the group, key, owner and attempt the row must still have
 * (as a PROCESSING row): renew (lease end, now), complete (result, now), fail (remark, now), release ().
 */
export function ownedWriteSql(table: string, placeholder: (n: number) => string): Record<OwnedWrite, string> {
  const where = (first: number): string =>
    `consumer_group = ${placeholder(first)} AND msg_key = ${placeholder(first + 1)} AND owner = ${placeholder(first + 2)} AND attempt = ${placeholder(first + 3)} AND status = 'PROCESSING'`;
  const [p1, p2] = [placeholder(1), placeholder(2)];
  return {
    renew: `UPDATE ${table} SET lease_until = ${p1}, updated_at = ${p2} WHERE ${where(3)}`,
    complete: `UPDATE ${table} SET status = 'SUCCESS', result = ${p1}, remark = NULL, lease_until = NULL, updated_at = ${p2} WHERE ${where(3)}`,
    fail: `UPDATE ${table} SET status = 'FAIL', remark = ${p1}, lease_until = NULL, updated_at = ${p2} WHERE ${where(3)}`,
    release: `DELETE FROM ${table} WHERE ${where(1)}`,
  };
}

/**
 * Leased claims on a SQL table: the backend's claim, and the owner-checked writes run through
 * `write` (which answers the rows matched). `time` turns epoch milliseconds into the column's type.
 */
export class SqlLeases<Time> implements LeasedClaims {
  constructor(
    readonly claim: (request: ClaimRequest) => Promise<ClaimResult>,
    private readonly write: (statement: OwnedWrite, values: unknown[]) => Promise<number>,
    private readonly clock: () => number,
    private readonly time: (ms: number) => Time,
  ) {}

  #owned(claim: Claim): unknown[] {
    return [claim.group, claim.key, claim.owner, claim.attempt];
  }

  async renew(claim: Claim, leaseMs: number): Promise<Date | undefined> {
    const now = this.clock();
    const until = now + leaseMs;
    const changed = await this.write('renew', [this.time(until), this.time(now), ...this.#owned(claim)]);
    return changed === 1 ? new Date(until) : undefined;
  }

  async complete(claim: Claim, result: string | null): Promise<boolean> {
    const now = this.time(this.clock());
    return (await this.write('complete', [result, now, ...this.#owned(claim)])) === 1;
  }

  async fail(claim: Claim, remark: string): Promise<boolean> {
    const now = this.time(this.clock());
    return (await this.write('fail', [remark, now, ...this.#owned(claim)])) === 1;
  }

  async release(claim: Claim): Promise<boolean> {
    return (await this.write('release', this.#owned(claim))) === 1;
  }
}
