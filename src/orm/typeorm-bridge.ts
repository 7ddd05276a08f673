import { ConfigError } from '../core/errors.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import type { PgClientLike } from '../ledger/postgres/postgres-client.js';
import { mysqlShim, pgShim } from './shims.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import { toolBridge } from './tool-bridge.js';

/** What a TypeORM query runner answers to `query(sql, parameters, true)`: its `QueryResult`. */
export interface TypeormQueryResultLike {
  /** The rows of a read (`RETURNING` rows of a PostgreSQL write). */
  readonly records?: unknown[];
  /** Rows a write touched (pg's rowCount, mysql2's affectedRows). */
  readonly affected?: number;
  /** The driver's own answer: on MySQL, mysql2's OK packet of a write or its rows of a read. */
  readonly raw?: unknown;
}

/** The part of a TypeORM `QueryRunner` oncemq calls. */
export interface TypeormQueryRunnerLike {
  /** `true` between `startTransaction()` and its commit or rollback. */
  readonly isTransactionActive: boolean;
  /** `true` once `release()` gave its connection back to the pool. */
  readonly isReleased: boolean;
  /** Runs one statement with the driver's placeholders (`$n` on pg, `?` on mysql2); answers TypeORM's `QueryResult`. */
  query(
    sql: string,
    parameters: unknown[] | undefined,
    useStructuredResult: true,
  ): Promise<TypeormQueryResultLike>;
  /** Gives the runner's connection back to the pool. */
  release(): Promise<void>;
}

/** The part of a TypeORM `EntityManager` oncemq calls: its query runner, set on a transaction's manager. */
export interface TypeormEntityManagerLike {
  /** The runner of the manager's transaction; `undefined` on `dataSource.manager`. */
  readonly queryRunner?: TypeormQueryRunnerLike | undefined;
}

/** The part of a TypeORM `DataSource` oncemq calls. */
export interface TypeormDataSourceLike<Tx extends TypeormEntityManagerLike = TypeormEntityManagerLike> {
  /** The data source's options. */
  readonly options: {
    /** The driver type: `postgres`, `mysql` or `mariadb`. */
    readonly type: string;
    /** PostgreSQL: the schema of the entities, and of the ledger table unless the ledger names one. */
    readonly schema?: string | undefined;
  };
  /** The data source's manager (no transaction): it only fixes the transaction type `Tx`. */
  readonly manager: Tx;
  /** Runs `work` in a transaction with its own manager: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (manager: Tx) => Promise<T>): Promise<T>;
  /** A query runner of its own (a pooled connection once it runs a statement), for statements outside a transaction. */
  createQueryRunner(): TypeormQueryRunnerLike;
}

/** TypeORM's driver types of the databases oncemq's ledgers live in. */
const DATABASES: Readonly<Record<string, 'postgres' | 'mysql'>> = {
  postgres: 'postgres',
  mysql: 'mysql',
  mariadb: 'mysql',
};

/** Which database `dataSource` talks to; a driver type with no oncemq ledger through TypeORM is refused. */
export function typeormDatabase(dataSource: TypeormDataSourceLike): 'postgres' | 'mysql' {
  const type = (dataSource as { options?: { type?: unknown } } | null)?.options?.type;
  const name = typeof type === 'string' ? type : '';
  const database = DATABASES[name];
  if (database === undefined) {
    throw new ConfigError(
      'dataSource',
      `TypeORM type ${JSON.stringify(name)} has no oncemq ledger through TypeORM's bridge; use 'postgres', 'mysql' ` +
        "or 'mariadb' (on SQLite, typeormLedger() takes a 'better-sqlite3' data source)",
    );
  }
  return database;
}

/**
 * The query runner of `manager`, a TypeORM transaction's manager; anything else (the data source's
 * own manager, a manager whose transaction has ended) is refused: its writes would run on another
 * connection, outside the claim's transaction.
 */
function transactionRunner(manager: TypeormEntityManagerLike): TypeormQueryRunnerLike {
  const runner = (manager as { queryRunner?: Partial<TypeormQueryRunnerLike> } | null)?.queryRunner;
  if (
    runner?.isTransactionActive !== true ||
    runner.isReleased === true ||
    typeof runner.query !== 'function'
  ) {
    throw new ConfigError(
      'tx',
      'expected the EntityManager of a TypeORM transaction (the `manager` of dataSource.transaction(), or ' +
        'ctx.tx), not dataSource.manager nor a manager whose transaction has ended: its writes would run on ' +
        'another connection, outside the claim’s transaction',
    );
  }
  return runner as TypeormQueryRunnerLike;
}

/** Runs one statement: on a transaction's runner, or on a runner of its own released after it. */
type Run = (sql: string, values: unknown[]) => Promise<TypeormQueryResultLike>;

function runOn(runner: TypeormQueryRunnerLike): Run {
  return (sql, values) => runner.query(sql, values, true);
}

function runAlone(dataSource: TypeormDataSourceLike): Run {
  return async (sql, values) => {
    const runner = dataSource.createQueryRunner();
    try {
      return await runner.query(sql, values, true);
    } finally {
      await runner.release();
    }
  };
}

/** pg's shape from TypeORM's: TypeORM keeps pg's rows as `records` and its rowCount as `affected`. */
function pgOver(run: Run): PgClientLike {
  return pgShim(async (text, values) => {
    const result = await run(text, [...values]);
    const rows = result.records ?? [];
    return { rows, rowCount: result.affected ?? rows.length };
  });
}

/** mysql2's shape from TypeORM's: `raw` is mysql2's answer (an OK packet, or the rows). */
function mysqlOver(run: Run): MysqlConnectionLike {
  return mysqlShim(async (sql, values) => [(await run(sql, [...(values ?? [])])).raw, undefined]);
}

/**
 * The bridge of a TypeORM `DataSource` on PostgreSQL (pg) or MySQL/MariaDB (mysql2): transactions
 * open with `dataSource.transaction()`, the handler gets the transaction's `EntityManager`, and the
 * ledger's statements run on its query runner (`manager.queryRunner.query(sql, values, true)`).
 * Statements outside a transaction take a query runner of their own each.
 */
export function typeormBridge<Tx extends TypeormEntityManagerLike>(
  dataSource: TypeormDataSourceLike<Tx>,
): SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> {
  const database = typeormDatabase(dataSource);
  const over = database === 'postgres' ? pgOver : mysqlOver;
  return toolBridge<Tx, TypeormQueryRunnerLike>({
    database,
    autocommit: over(runAlone(dataSource)),
    open: (work) => dataSource.transaction(work),
    transactionOf: transactionRunner,
    over: (runner) => over(runOn(runner)),
  });
}
