/**
 * What the `scale` suite needs of one ledger backend: its ledgers on tables of its own database, a
 * bulk load of the rows of bench/scale-rows.ts, and the database's own view of sizes, lock waits and
 * deadlocks. One file per database implements it (scale-postgres.ts, scale-mysql.ts).
 */
import type { Ledger } from '../src/ledger/ledger.js';

/** How rows were loaded: with the ledger's indexes in place, or with them dropped and built after. */
export type FillMethod = 'rebuild' | 'indexed';

/** Bytes on disk of a ledger table: its rows (heap or clustered index) and its other indexes. */
export interface TableBytes {
  readonly tableBytes: number;
  readonly indexBytes: number;
}

/** One look at the database's lock waits: sessions waiting for a lock now, and the longest wait so far. */
export interface LockWaits {
  readonly waiting: number;
  readonly longestMs: number;
}

/** A backend of the `scale` suite, open on its own database. */
export interface ScaleTarget {
  /** Row-name prefix: `postgres`, `postgres-daily`, `mysql`. */
  readonly name: string;
  /** A ledger on `table` (migrated by init()), on the target's pool; `clock` for the purge's cut-off. */
  ledger(table: string): Ledger;
  /** Prepares `table` for rows spanning the days before `endMs` (the daily ledger's partitions). */
  prepare(table: string, endMs: number): Promise<void>;
  /** Bulk-loads rows `from` to `to - 1` of scale-rows.ts into `table` with `method`. */
  fill(table: string, from: number, to: number, endMs: number, method: FillMethod): Promise<void>;
  /** Deletes every row of `table` (the empty table between sizes). */
  clear(table: string): Promise<void>;
  /** Refreshes the planner's statistics of `table`. */
  analyze(table: string): Promise<void>;
  bytes(table: string): Promise<TableBytes>;
  /** Rows of `table` (exact count). */
  count(table: string): Promise<number>;
  lockWaits(): Promise<LockWaits>;
  /** The database's deadlock counter (server-wide on MariaDB). */
  deadlocks(): Promise<number>;
  /** Drops the target's database and ends its pools. */
  drop(): Promise<void>;
  close(): Promise<void>;
}
