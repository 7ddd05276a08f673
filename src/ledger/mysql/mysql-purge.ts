import { rows, header, type MysqlValue } from './mysql-client.js';

/**
 * The MySQL/MariaDB ledger's purge, one batch at a time. The ledger's rows are clustered by the primary
 * key `(consumer_group, msg_key)`, and keys are event ids, random: the rows that expire together lie
 * on random pages. A single `DELETE … WHERE status IN (…) AND updated_at < ? LIMIT n` walks the
 * `(status, updated_at)` index in time order and so visits a different clustered page, and a different
 * `(status, lease_until)` page, for almost every row; once the table outgrows the buffer pool each of
 * those is a page read and, later, a dirty page written (measured on a 3M-row table and a 128 MB
 * buffer pool: 1.7–3.3 page reads per deleted row). Here a batch is two steps:
 *
 * 1. a consistent read of up to `batchSize` expired keys from the same index (`SELECT consumer_group,
 *    msg_key … LIMIT n`: the index covers it, it takes no lock and reads no row);
 * 2. the keys sorted by the primary key and deleted in that order, in chunks of
 *    {@link MYSQL_PURGE_CHUNK}, each `DELETE … WHERE (consumer_group, msg_key) IN (…) AND status IN
 *    ('SUCCESS', 'FAIL') AND updated_at < ?` its own autocommit transaction that locks its rows only.
 *
 * The rows of a large batch share pages, and the pages come in key order: with 100,000 keys a batch
 * read 0.65–0.74 pages per deleted row on that table. The DELETE checks the cut-off again on the row
 * it locks, so a row claimed again, completed anew or re-created between the read and the DELETE
 * (PROCESSING, or updated_at past the cut-off) stays. A purge killed between chunks leaves every row
 * whole or gone, as each chunk commits alone.
 */

/**
 * Most keys in one DELETE: MariaDB's range optimizer turns a longer `(a, b) IN (…)` list (its
 * `optimizer_max_sel_args`, 16,000 parts by default) into a full table scan.
 */
export const MYSQL_PURGE_CHUNK = 1000;

/** The statements of the purge for one quoted table. */
export function mysqlPurgeStatements(table: string) {
  const finished = `status IN ('SUCCESS', 'FAIL') AND updated_at < ?`;
  return {
    /** `LIMIT` takes a validated integer: some servers refuse a bound LIMIT from mysql2's execute. */
    expiredKeys: (limit: number) =>
      `SELECT consumer_group, msg_key FROM ${table} WHERE ${finished} LIMIT ${Math.trunc(limit)}`,
    /** Binds `count` pairs of group and key, then the cut-off. */
    deleteKeys: (count: number) =>
      `DELETE FROM ${table} WHERE (consumer_group, msg_key) IN (${Array.from({ length: count }, () => '(?, ?)').join(', ')}) AND ${finished}`,
  };
}

export type MysqlPurgeStatements = ReturnType<typeof mysqlPurgeStatements>;

interface ExpiredKey {
  readonly consumer_group: Buffer | string;
  readonly msg_key: Buffer | string;
}

/** The bytes of a VARBINARY column, whether the driver answered a Buffer or a string. */
const bytes = (value: Buffer | string): Buffer => (Buffer.isBuffer(value) ? value : Buffer.from(value));

/** Primary-key order: VARBINARY compares byte by byte, as Buffer.compare does. */
function byPrimaryKey(a: ExpiredKey, b: ExpiredKey): number {
  return (
    Buffer.compare(bytes(a.consumer_group), bytes(b.consumer_group)) ||
    Buffer.compare(bytes(a.msg_key), bytes(b.msg_key))
  );
}

/**
 * One purge batch (see above): reads up to `batchSize` expired keys, deletes them by primary key.
 * Answers the rows deleted.
 */
export async function purgeMysqlBatch(
  execute: (sql: string, values: MysqlValue[]) => Promise<unknown>,
  statements: MysqlPurgeStatements,
  olderThan: number,
  batchSize: number,
): Promise<number> {
  const keys = rows<ExpiredKey>(await execute(statements.expiredKeys(batchSize), [olderThan])).sort(
    byPrimaryKey,
  );
  let deleted = 0;
  for (let start = 0; start < keys.length; start += MYSQL_PURGE_CHUNK) {
    const chunk = keys.slice(start, start + MYSQL_PURGE_CHUNK);
    const values: MysqlValue[] = chunk.flatMap((key) => [key.consumer_group, key.msg_key]);
    values.push(olderThan);
    deleted += header(await execute(statements.deleteKeys(chunk.length), values)).affectedRows;
  }
  return deleted;
}
