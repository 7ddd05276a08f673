import type { SqlValue } from '../../sql/sql-value.js';
import type { OutboxSession } from '../outbox-session.js';

/** Columns of a pending row the relay publishes. */
export const ROW_COLUMNS = 'id, message_id, topic, business_key, ordering_key, seq, headers, body, attempts';

/** The outbox's tables, quoted and qualified. */
export interface OutboxTables {
  /** One row per outgoing message, `sent_at` NULL while pending. */
  readonly messages: string;
  /** One row per ordering key, holding its last sequence number. */
  readonly keys: string;
  /** The quoted name of one of the outbox's indexes. */
  readonly index: (suffix: string) => string;
}

/** Column types of the messages table on one database. */
export interface OutboxColumnTypes {
  readonly id: string;
  readonly text: string;
  readonly name: string;
  readonly big: string;
  readonly blob: string;
  readonly int: string;
}

/**
 * The messages table's columns, the same on every database. Times are epoch milliseconds written by
 * oncemq, so the three databases compare them alike.
 */
export function outboxColumns(t: OutboxColumnTypes): string {
  return [
    `id ${t.id}`,
    `message_id ${t.name} NOT NULL`,
    `topic ${t.name} NOT NULL`,
    `business_key ${t.text} NOT NULL`,
    `ordering_key ${t.name}`,
    `seq ${t.big}`,
    `headers ${t.text} NOT NULL`,
    `body ${t.blob} NOT NULL`,
    `created_at ${t.big} NOT NULL`,
    `available_at ${t.big} NOT NULL`,
    `attempts ${t.int} NOT NULL DEFAULT 0`,
    `lease_owner ${t.name}`,
    `lease_until ${t.big}`,
    `sent_at ${t.big}`,
    `last_error ${t.text}`,
  ].join(', ');
}

/**
 * The messages table's indexes where the database has `CREATE INDEX IF NOT EXISTS` and partial
 * indexes (PostgreSQL, SQLite): one id per message, one row per ordering key's position, the pending
 * rows, and the sent ones for the cleanup.
 */
export function outboxIndexes({ messages, index }: OutboxTables): readonly string[] {
  return [
    `CREATE UNIQUE INDEX IF NOT EXISTS ${index('message')} ON ${messages} (message_id)`,
    `CREATE UNIQUE INDEX IF NOT EXISTS ${index('order')} ON ${messages} (ordering_key, seq)`,
    `CREATE INDEX IF NOT EXISTS ${index('pending')} ON ${messages} (id) WHERE sent_at IS NULL`,
    `CREATE INDEX IF NOT EXISTS ${index('sent')} ON ${messages} (sent_at)`,
  ];
}

/** The claim as one statement, where the database has `UPDATE … RETURNING`. */
export interface OutboxSingleClaim {
  /** The statement, over `picked`: the candidates' `SELECT`, whose values come first or last per database. */
  sql(tables: OutboxTables, picked: string, ids: number): string;
  /** The statement's values in the order of its placeholders. */
  values(owner: string, leaseUntil: number, now: number, ids: readonly string[]): SqlValue[];
}

/**
 * What differs between the outbox's databases, each written in its own file: DDL, the sequence of an
 * ordering key, the claim, the cleanup, and how the outbox opens transactions of its own. The
 * statements every database shares are built once, in `outboxStatements`.
 */
export interface OutboxSql {
  /** Whether tables may live in a named schema (PostgreSQL's). */
  readonly schemas: boolean;
  /** Whether `add` can wake the relay (PostgreSQL's `NOTIFY`). */
  readonly notifies: boolean;
  /** Appended to the relay's locking read: skip rows another relay holds (`''` where the writer is alone). */
  readonly skipLocked: string;
  /**
   * Whether the claim reads the candidates with a plain `SELECT` first, so that an idle relay never
   * asks for the write lock (SQLite's file-wide lock).
   */
  readonly readBeforeClaim: boolean;
  /** `CREATE … IF NOT EXISTS` statements of the two tables and their indexes. */
  ddl(tables: OutboxTables): readonly string[];
  /** Takes the next sequence number of an ordering key, locking its row until the caller's commit. */
  nextSeq(keys: string): string;
  /** Reads the number back, where `nextSeq` cannot return it (MySQL); `undefined` elsewhere. */
  readSeq(keys: string): string | undefined;
  /** The claim as one statement; `undefined` where it takes a locking read and an update (MySQL). */
  readonly claim: OutboxSingleClaim | undefined;
  /** Deletes up to `batch` rows sent before the time bound as the first value. */
  cleanup(messages: string, batch: number): string;
  /** What the outbox needs to open transactions of its own, said in refusals. */
  readonly needs: string;
  /** Whether `database` has the shape of what this database's sessions run on. */
  accepts(database: object | null): boolean;
  /** Opens transactions on `database`; see `openOutboxSession` for `atomic`. */
  session(database: unknown, atomic: boolean): OutboxSession<unknown>;
}
