import { LedgerUnavailableError } from '../core/errors.js';
import { isThenable } from '../core/thenable.js';
import type { BatchWork, Claim, ClaimRequest, Ledger, TransactionWork } from '../ledger/ledger.js';
import { InjectedFault } from './fault-injector.js';

/** Decides whether the commit of a key fails. `FaultInjector` implements it (fault `commit-failure`). */
export interface CommitFaultHooks {
  /** Asked per commit of a claim whose handler succeeded (its key and attempt); `true` makes that commit fail. */
  commitFailure(key: string, attempt: number): boolean;
}

/**
 * The error of an injected commit failure: a `LedgerUnavailableError` — the connection or the database
 * lost at COMMIT, not charged to the message — with the {@link InjectedFault} as its cause.
 */
function commitFailed(key: string): LedgerUnavailableError {
  return new LedgerUnavailableError(
    `the commit of key '${key}' failed after its handler succeeded (injected fault commit-failure); nothing was applied`,
    { cause: new InjectedFault('commit-failure', key) },
  );
}

/** Runs the caller's work, then fails the commit when `hooks` chooses one of `keys`. */
function failingAfter<T>(
  out: T | PromiseLike<T>,
  claims: () => readonly Claim[],
  hooks: CommitFaultHooks,
): T | Promise<T> {
  const check = (value: T): T => {
    for (const claim of claims()) {
      if (hooks.commitFailure(claim.key, claim.attempt)) throw commitFailed(claim.key);
    }
    return value;
  };
  return isThenable(out) ? Promise.resolve(out).then(check) : check(out);
}

/**
 * Wraps `ledger` so that commits fail after a successful handler, for the keys `hooks` chooses: the
 * one fault that tells a pipeline that acks after the commit from one that acks as soon as the
 * handler returns (which would lose the effect: acked, never applied).
 *
 * - `transaction()` runs the caller's work (the handler) and, when it succeeded, asks `hooks` about
 *   the key; a chosen key makes the transaction reject, so the ledger rolls back the claim and the
 *   handler's writes together, as a refused COMMIT does.
 * - `transactionMany()` asks about every won key of the batch; one chosen key fails the batch's commit.
 * - `complete()` (leased mode) asks about the claim's key; a chosen key's completion is not written,
 *   so its row stays PROCESSING until the lease ends, as when the database is lost mid-completion.
 *
 * The error is a `LedgerUnavailableError` caused by an `InjectedFault('commit-failure')`. Everything
 * else (capabilities, inspection, the backend's own properties) is the wrapped ledger's.
 */
export function injectCommitFailures<L extends Ledger>(ledger: L, hooks: CommitFaultHooks): L {
  type Tx = L extends Ledger<infer T> ? T : never;
  const target = ledger as unknown as Ledger<Tx>;
  const transaction = (request: ClaimRequest, work: TransactionWork<Tx>) =>
    target.transaction(request, (tx, claim) => failingAfter(work(tx, claim), () => [claim], hooks));
  const transactionMany = (requests: readonly ClaimRequest[], work: BatchWork<Tx>) =>
    target.transactionMany(requests, (tx, won) =>
      failingAfter(work(tx, won), () => won.map(({ claim }) => claim), hooks),
    );
  const complete = (claim: Claim, result: string | null): Promise<void> =>
    hooks.commitFailure(claim.key, claim.attempt)
      ? Promise.reject(commitFailed(claim.key))
      : target.complete(claim, result);
  const replaced: Partial<Record<PropertyKey, unknown>> = { transaction, transactionMany, complete };
  return new Proxy(ledger, {
    get(object, prop) {
      if (Object.hasOwn(replaced, prop)) return replaced[prop];
      const value: unknown = Reflect.get(object, prop, object);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
    },
  });
}
