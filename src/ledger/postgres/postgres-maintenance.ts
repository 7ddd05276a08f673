import { listFilter } from '../list-filter.js';
import type { LedgerRecord, ListQuery, MaintenanceLock, PurgeOptions, PurgeResult } from '../ledger.js';
import type { LedgerRow } from '../ledger-row.js';
import { purgeInBatches } from '../purge-batches.js';
import { pgRecord } from './postgres-claim.js';
import {
  pgExecute,
  pgFailure,
  pgQuery,
  type PgClientLike,
  type PgPoolClientLike,
  type PgPoolLike,
} from './postgres-client.js';
import type { PgStatements } from './postgres-ledger-sql.js';

/** Rows matching `query`, oldest update first; stuck claims use the partial index on lease_until. */
export async function pgList(
  q: PgClientLike,
  sql: PgStatements,
  query: ListQuery,
): Promise<readonly LedgerRecord[]> {
  const { where, values, limit } = listFilter(query, (deadline) => deadline);
  let placeholder = 0;
  const numbered = where.replace(/\?/g, () => `$${++placeholder}`);
  const rows = await pgQuery<LedgerRow>(
    q,
    `SELECT * FROM ${sql.table}${numbered}
     ORDER BY updated_at, consumer_group, msg_key LIMIT $${placeholder + 1}`,
    [...values, limit],
    'listing',
  );
  return rows.map(pgRecord);
}

const LOCK_SQL = 'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked';
const UNLOCK_SQL = 'SELECT pg_advisory_unlock(hashtextextended($1, 0))';

/**
 * Takes the session advisory lock `name` when free. With a pool, on a dedicated connection held
 * until release() (or until that connection dies, which frees the lock); with a joined client, on it.
 */
export async function pgTryAdvisoryLock(
  target: { readonly pool: PgPoolLike } | { readonly client: PgClientLike },
  name: string,
): Promise<MaintenanceLock | undefined> {
  if ('client' in target) {
    const client = target.client;
    const [row] = await pgQuery<{ locked: boolean }>(client, LOCK_SQL, [name], 'taking the maintenance lock');
    if (row?.locked !== true) return undefined;
    return {
      release: async () => {
        await pgQuery(client, UNLOCK_SQL, [name], 'releasing the maintenance lock');
      },
    };
  }
  let client: PgPoolClientLike;
  try {
    client = await target.pool.connect();
  } catch (error) {
    throw pgFailure(error, 'connecting');
  }
  let locked: boolean;
  try {
    const [row] = await pgQuery<{ locked: boolean }>(client, LOCK_SQL, [name], 'taking the maintenance lock');
    locked = row?.locked === true;
  } catch (error) {
    client.release(true);
    throw error;
  }
  if (!locked) {
    client.release();
    return undefined;
  }
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      try {
        await client.query(UNLOCK_SQL, [name]);
        client.release();
      } catch (error) {
        // Destroying the connection ends its session, which frees the lock as well.
        client.release(error instanceof Error ? error : true);
      }
    },
  };
}

/** Deletes finished rows in bounded batches, one short autocommit statement each. */
export function pgPurge(
  q: PgClientLike,
  sql: PgStatements,
  options: Required<PurgeOptions>,
): Promise<PurgeResult> {
  return purgeInBatches(options, () =>
    pgExecute(q, sql.purge, [options.olderThan, options.batchSize], 'purging'),
  );
}
