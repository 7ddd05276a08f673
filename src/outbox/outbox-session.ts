import { LedgerUnavailableError, OncemqError } from '../core/errors.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';

/** Transactions on one database, opened by the outbox itself. */
export interface OutboxSession<Tx> {
  /** Runs `work` in a transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * PostgreSQL: LISTENs on `channel` on a connection of its own; `wake` runs at each notification,
   * `lost` once when the connection fails. Answers how to stop listening.
   */
  listen?(channel: string, wake: () => void, lost: (error: Error) => void): Promise<() => Promise<void>>;
}

/** A driver's failure as the outbox reports it: the database is unavailable, the cause kept. */
export function unavailable(error: unknown, what: string): Error {
  if (error instanceof OncemqError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new LedgerUnavailableError(`the outbox database failed ${what}: ${message}`, { cause: error });
}

/**
 * Through an ORM's bridge: each transaction is one the tool opens, and the work gets the tool's
 * transaction (what the outbox's dialect runs on). No LISTEN: the relay polls. On MySQL the tool's
 * transactions run at its isolation level (the relay's claims are locking reads, which see the
 * latest commit at any level).
 */
export function bridgeSession<Tx>(bridge: SqlBridge<unknown, Tx>): OutboxSession<Tx> {
  return {
    async transaction(work) {
      try {
        return await bridge.transaction((_conn, tx) => work(tx));
      } catch (error) {
        throw unavailable(error, 'in a transaction');
      }
    },
  };
}
