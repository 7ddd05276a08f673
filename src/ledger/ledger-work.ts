import { ConfigError } from '../core/errors.js';
import { isThenable } from '../core/thenable.js';
import { checkResult } from './claim-request.js';
import type { BatchWork, TransactionWork } from './ledger.js';

/**
 * Remembers what the caller's work threw inside a claim's transaction, so that the runtime passes
 * those errors on unchanged and wraps only the ledger's own failures.
 */
export class WorkFailures {
  /** Made at the first error: most work throws nothing. */
  #thrown: unknown[] | undefined;

  note(error: unknown): unknown {
    (this.#thrown ??= []).push(error);
    return error;
  }

  has(error: unknown): boolean {
    return this.#thrown?.includes(error) === true;
  }
}

/** Runs work, then `check` on its value; synchronous work stays synchronous. */
function settle<W, R>(
  run: () => W | PromiseLike<W>,
  check: (out: W) => R,
  failures: WorkFailures,
): R | Promise<R> {
  let out: W | PromiseLike<W>;
  try {
    out = run();
  } catch (error) {
    throw failures.note(error);
  }
  if (!isThenable(out)) return check(out);
  return Promise.resolve(out).then(check, (error: unknown) => {
    throw failures.note(error);
  });
}

/** The work of a single claim, its result checked before the backend stores it. */
export function checkedWork<Tx>(work: TransactionWork<Tx>, failures: WorkFailures): TransactionWork<Tx> {
  return (tx, claim) => settle(() => work(tx, claim), checkResult, failures);
}

/** Checks that batch work returned one storable result (a string or null) per won claim. */
export function checkBatchResults(results: unknown, expected: number): readonly (string | null)[] {
  if (!Array.isArray(results) || results.length !== expected) {
    throw new ConfigError(
      'transactionMany.work',
      `must return one result (a string or null) per won claim: expected ${expected}, got ${
        Array.isArray(results) ? results.length : typeof results
      }`,
    );
  }
  return (results as unknown[]).map(checkResult);
}

/** The work of a batch, its results checked before the backend stores them. */
export function checkedBatchWork<Tx>(work: BatchWork<Tx>, failures: WorkFailures): BatchWork<Tx> {
  return (tx, won) =>
    settle(
      () => work(tx, won),
      (out) => checkBatchResults(out, won.length),
      failures,
    );
}
