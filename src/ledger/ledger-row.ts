import type { LedgerRecord, LedgerStatus } from './ledger.js';

/** A ledger row by column name, as every SQL backend selects it (`SELECT *`). */
export interface LedgerRow {
  consumer_group: unknown;
  msg_key: unknown;
  status: unknown;
  fingerprint: unknown;
  owner: unknown;
  attempt: unknown;
  lease_until: unknown;
  broker_id: unknown;
  topic: unknown;
  remark: unknown;
  result: unknown;
  created_at: unknown;
  updated_at: unknown;
}

/** How one driver returns text and time columns. */
export interface ColumnReader {
  text(value: unknown): string;
  time(value: unknown): Date;
}

/** Text as a string, whether the driver returns it as one or as a Buffer (MySQL VARBINARY). */
export function columnText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

/** SQLite and MySQL: times are epoch milliseconds (BIGINT may arrive as a string), text may be a Buffer. */
export const EPOCH_MS_COLUMNS: ColumnReader = Object.freeze({
  text: columnText,
  time: (value: unknown) => new Date(Number(value)),
});

/** PostgreSQL: `timestamptz` columns arrive as Dates. */
export const TIMESTAMPTZ_COLUMNS: ColumnReader = Object.freeze({
  text: columnText,
  time: (value: unknown) => (value instanceof Date ? value : new Date(String(value))),
});

/** The record of a selected row. */
export function rowToRecord(row: LedgerRow, read: ColumnReader): LedgerRecord {
  const text = (value: unknown): string | null =>
    value === null || value === undefined ? null : read.text(value);
  return {
    group: read.text(row.consumer_group),
    key: read.text(row.msg_key),
    status: read.text(row.status) as LedgerStatus,
    fingerprint: text(row.fingerprint),
    owner: text(row.owner),
    attempt: Number(row.attempt),
    leaseUntil: row.lease_until === null || row.lease_until === undefined ? null : read.time(row.lease_until),
    brokerId: text(row.broker_id),
    topic: text(row.topic),
    remark: text(row.remark),
    result: text(row.result),
    createdAt: read.time(row.created_at),
    updatedAt: read.time(row.updated_at),
  };
}
