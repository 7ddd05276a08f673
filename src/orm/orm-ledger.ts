import { ConfigError } from '../core/errors.js';
import type { Ledger } from '../ledger/ledger.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import { MysqlLedger } from '../ledger/mysql/mysql-ledger.js';
import type { PgClientLike } from '../ledger/postgres/postgres-client.js';
import { PostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import type { SqlDialect } from '../ledger/sql-dialect.js';
import type { SqlLedgerConfig } from '../ledger/sql-ledger-config.js';

/** A ledger whose transactions an ORM or query builder opens: `ctx.tx` is the tool's transaction. */
export interface BridgedLedger<Tx> extends Ledger<Tx> {
  /** How statements run in the tool's transaction (`transition(ledger.dialect, ctx.tx, …)`, the outbox). */
  readonly dialect: SqlDialect<Tx>;
  /**
   * The ledger joined to `tx`, a transaction the application opened with the tool: each claim runs
   * under a savepoint of it, the application commits. `tx` must be a transaction, not the tool's
   * database handle (a ConfigError).
   */
  join(tx: Tx): BridgedLedger<Tx>;
  /** Creates or upgrades the ledger table; answers the version reached. */
  migrate?(): Promise<number>;
}

/** Configuration of a ledger built on an ORM or query builder; the database comes from the tool. */
export interface OrmLedgerConfig extends SqlLedgerConfig {
  /** PostgreSQL only: schema of the ledger table. @default 'public' */
  readonly schema?: string;
  /** PostgreSQL only: `'daily'` partitions (see docs/ledgers/postgres.md). @default false */
  readonly partitioned?: false | 'daily';
  /** MySQL only: database of the ledger table. @default the connection's current database */
  readonly database?: string;
  /** MySQL only: times a claim is run again after a lock conflict outside a caller's transaction. @default 3 */
  readonly lockRetries?: number;
}

const PG_ONLY = ['schema', 'partitioned'] as const;
const MYSQL_ONLY = ['database', 'lockRetries'] as const;

/**
 * The SQL ledger of the database `bridge` talks to (PostgresLedger or MysqlLedger), opening its
 * transactions through the tool. An option of the other database is refused.
 */
export function bridgedLedger<Tx>(
  bridge: SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx>,
  config: OrmLedgerConfig = {},
): BridgedLedger<Tx> {
  const foreign = bridge.database === 'postgres' ? MYSQL_ONLY : PG_ONLY;
  for (const field of foreign) {
    if (config[field] !== undefined) {
      throw new ConfigError(field, `is not an option of a ${bridge.database} ledger`);
    }
  }
  const { schema, partitioned, database, lockRetries, ...common } = config;
  if (bridge.database === 'postgres') {
    return new PostgresLedger<Tx>({
      ...common,
      schema,
      partitioned,
      bridge: bridge as SqlBridge<PgClientLike, Tx>,
    });
  }
  return new MysqlLedger<MysqlConnectionLike, Tx>({
    ...common,
    database,
    lockRetries,
    bridge: bridge as SqlBridge<MysqlConnectionLike, Tx>,
  });
}
