import { ConfigError } from '../core/errors.js';
import { SILENT_LOGGER } from '../core/logger.js';
import type { Ledger } from '../ledger/ledger.js';
import { UsageError } from './command.js';
import { resolveServiceUrl, type ResolvedUrl } from './connection.js';

/** A ledger the CLI opened, and how to let go of everything it opened for it. */
export interface OpenedStore {
  readonly ledger: Ledger;
  /** What the ledger is connected to (password redacted where there is one). */
  readonly location: string;
  close(): Promise<void>;
}

export interface StoreTarget {
  /** `--url`: a connection URL, or the database file for `sqlite`. */
  readonly url?: string;
  /** `--table`. */
  readonly table?: string;
  /** `--schema`: the PostgreSQL schema of the table. */
  readonly schema?: string;
  /** `--database`: the MySQL database of the table (default: the URL's). */
  readonly database?: string;
  /**
   * Create or upgrade the table when opening (`oncemq migrate`). Without it (`oncemq ledger`) the
   * ledger only checks that the table is there, and never creates a file, schema or table.
   */
  readonly migrate: boolean;
}

/** The `parseArgs` options that pick a store and its table, shared by `migrate` and `ledger`. */
export const STORE_ARGS = Object.freeze({
  store: { type: 'string' },
  url: { type: 'string' },
  table: { type: 'string' },
  schema: { type: 'string' },
  database: { type: 'string' },
} as const);

/** Their usage lines. */
export function storeUsage(): string {
  return `  --store S        ${STORE_NAMES.join(', ')} (default: from the --url scheme)
  --url URL        connection URL (database file path for sqlite); default: ONCEMQ_POSTGRES_URL /
                   ONCEMQ_MYSQL_URL, else the loopback default
  --table NAME     ledger table (default oncemq_ledger)
  --schema NAME    PostgreSQL schema of the table (default public)
  --database NAME  MySQL/MariaDB database of the table (default: the URL's)`;
}

/** The store a command's parsed options name. */
export function storeTarget(
  values: { readonly [K in keyof typeof STORE_ARGS]?: string | undefined },
  migrate: boolean,
): StoreTarget {
  const { url, table, schema, database } = values;
  return { url, table, schema, database, migrate };
}

/** Which stores take `--schema` and `--database`. */
const STORE_OPTIONS: Readonly<Record<'schema' | 'database', string>> = {
  schema: 'postgres',
  database: 'mysql',
};

type StoreOpener = (target: StoreTarget) => Promise<OpenedStore>;

/** Loads an optional driver, telling the user which package to install when it is missing. */
export async function loadDriver<T>(load: () => Promise<T>, driver: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw new ConfigError('store', `this store needs the ${driver} package (npm install ${driver})`, {
      cause: error,
    });
  }
}

const url = (service: 'postgres' | 'mysql', target: StoreTarget): ResolvedUrl =>
  resolveServiceUrl(service, target.url);

/**
 * Each store by name: adding one is one entry. Drivers load only when their store is used. The
 * commands print a failure as one line of their own, so their ledgers log nothing.
 */
const STORES: Readonly<Record<string, StoreOpener>> = {
  async sqlite(target) {
    if (target.url === undefined || target.url === '') {
      throw new UsageError('--store sqlite needs --url PATH, the ledger database file');
    }
    const path = target.url.replace(/^sqlite:(\/\/)?/, '');
    const { SqliteLedger } = await import('../ledger/sqlite/sqlite-ledger.js');
    const ledger = new SqliteLedger({
      database: path,
      table: target.table,
      migrate: target.migrate,
      logger: SILENT_LOGGER,
    });
    return { ledger, location: path, close: () => ledger.close() };
  },
  async mysql(target) {
    const { url: uri } = url('mysql', target);
    const mysql = await loadDriver(() => import('mysql2/promise'), 'mysql2');
    const { MysqlLedger } = await import('../ledger/mysql/mysql-ledger.js');
    const pool = mysql.createPool({ uri, connectionLimit: 2 });
    const { table, database, migrate } = target;
    const ledger = new MysqlLedger({ pool, table, database, migrate, logger: SILENT_LOGGER });
    return {
      ledger,
      location: redactedLocation(uri),
      close: async () => {
        await ledger.close();
        await pool.end();
      },
    };
  },
  async postgres(target) {
    const { url: connectionString } = url('postgres', target);
    const { PostgresLedger } = await import('../ledger/postgres/postgres-ledger.js');
    const { table, schema, migrate } = target;
    const ledger = new PostgresLedger({
      connectionString,
      poolSize: 2,
      table,
      schema,
      migrate,
      logger: SILENT_LOGGER,
    });
    return { ledger, location: redactedLocation(connectionString), close: () => ledger.close() };
  },
};

/** A URL with its password replaced, for printing. */
export function redactedLocation(value: string): string {
  try {
    const parsed = new URL(value);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return value;
  }
}

export const STORE_NAMES: readonly string[] = Object.freeze(Object.keys(STORES));

/** The store a URL points at by its scheme (`mysql://`, `postgres://`), or undefined. */
export function storeOfUrl(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (/^mysql:|^mariadb:/i.test(value)) return 'mysql';
  if (/^postgres(ql)?:/i.test(value)) return 'postgres';
  if (/^sqlite:|\.(db|sqlite3?)$/i.test(value)) return 'sqlite';
  return undefined;
}

/**
 * Opens the ledger of `--store` (or the store `--url` names), without initializing it; `--schema`
 * and `--database` are refused for a store that has no such thing.
 */
export async function openStore(store: string | undefined, target: StoreTarget): Promise<OpenedStore> {
  const name = store ?? storeOfUrl(target.url);
  if (name === undefined) {
    throw new UsageError(`--store is required (one of ${STORE_NAMES.join(', ')})`);
  }
  const opener = Object.hasOwn(STORES, name) ? STORES[name] : undefined;
  if (opener === undefined) {
    throw new UsageError(`unknown store '${name}'; use one of ${STORE_NAMES.join(', ')}`);
  }
  for (const [option, only] of Object.entries(STORE_OPTIONS)) {
    if (target[option as keyof typeof STORE_OPTIONS] !== undefined && name !== only) {
      throw new UsageError(`--${option} is for --store ${only}, not ${name}`);
    }
  }
  return opener(target);
}
