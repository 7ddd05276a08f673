import type { SqlDialect } from '../ledger/sql-dialect.js';
import type { SqlValue } from '../sql/sql-value.js';
import { resolveOutboxConfig, type OutboxConfig, type ResolvedOutboxConfig } from './outbox-config.js';
import { openOutboxSession, type OutboxDatabase } from './outbox-database.js';
import { storedOutboxMessage, type OutboxMessage } from './outbox-message.js';
import { outboxDdl } from './outbox-schema.js';
import { outboxStatements, type OutboxStatements } from './outbox-statements.js';

/** What `add` wrote: the row's unique id, sent as the message's `oncemq-outbox-id` header. */
export interface OutboxEntry {
  /** The row's unique id (a UUID), the same on every publish of the row. */
  readonly id: string;
  /** The topic the relay publishes to. */
  readonly topic: string;
  /** The business key the message carries. */
  readonly key: string;
  /** The message's ordering key, if it has one. */
  readonly orderingKey: string | undefined;
  /** Position of the message in its ordering key (1, 2, …); `undefined` without one. */
  readonly seq: number | undefined;
}

/** The transactional outbox: writes outgoing messages in the caller's transaction; a relay publishes them. */
export interface Outbox<Tx> {
  /** How statements run in the caller's transaction `Tx`: the database the outbox lives in. */
  readonly dialect: SqlDialect<Tx>;
  /** The outbox table's name, checked. */
  readonly table: string;
  /** PostgreSQL schema of the tables; `undefined` for the connection's search path (and elsewhere). */
  readonly schema: string | undefined;
  /** @internal the names and statements the relay runs */
  readonly config: ResolvedOutboxConfig<Tx>;
  /** @internal */
  readonly statements: OutboxStatements;
  /**
   * Writes `message` in `tx`, the caller's open transaction (`ctx.tx`, a pg client inside BEGIN, a
   * mysql2 connection, the better-sqlite3 database): it is sent only if that transaction commits.
   * A bad message throws a PermanentError naming the field. Driver errors propagate unchanged, like
   * the caller's own SQL.
   */
  add(tx: Tx, message: OutboxMessage): Promise<OutboxEntry>;
  /** Creates the outbox tables when missing, on `database` (a pool, or a SQLite database). */
  migrate(database: OutboxDatabase): Promise<void>;
}

class SqlOutbox<Tx> implements Outbox<Tx> {
  readonly config: ResolvedOutboxConfig<Tx>;
  readonly statements: OutboxStatements;

  constructor(config: OutboxConfig<Tx>) {
    this.config = resolveOutboxConfig(config);
    this.statements = outboxStatements(this.config);
  }

  get dialect(): SqlDialect<Tx> {
    return this.config.dialect;
  }

  get table(): string {
    return this.config.table;
  }

  get schema(): string | undefined {
    return this.config.schema;
  }

  async #nextSeq(tx: Tx, orderingKey: string): Promise<number> {
    const { dialect } = this.config;
    const { nextSeq, readSeq } = this.statements;
    let rows: readonly Record<string, unknown>[];
    if (readSeq === undefined) {
      rows = await dialect.query(tx, nextSeq, [orderingKey]);
    } else {
      await dialect.execute(tx, nextSeq, [orderingKey]);
      rows = await dialect.query(tx, readSeq, [orderingKey]);
    }
    return Number(rows[0]?.last_seq);
  }

  async add(tx: Tx, message: OutboxMessage): Promise<OutboxEntry> {
    const stored = storedOutboxMessage(message);
    const { dialect, channel } = this.config;
    const seq = stored.orderingKey === null ? null : await this.#nextSeq(tx, stored.orderingKey);
    const now = Date.now();
    const values: SqlValue[] = [
      stored.messageId,
      stored.topic,
      stored.key,
      stored.orderingKey,
      seq,
      stored.headers,
      stored.body,
      now,
      now,
    ];
    await dialect.execute(tx, this.statements.insert, values);
    if (this.statements.notify !== undefined && channel !== undefined) {
      await dialect.query(tx, this.statements.notify, [channel]);
    }
    return {
      id: stored.messageId,
      topic: stored.topic,
      key: stored.key,
      orderingKey: stored.orderingKey ?? undefined,
      seq: seq ?? undefined,
    };
  }

  async migrate(database: OutboxDatabase): Promise<void> {
    const session = openOutboxSession(this.config.dialect, database, true);
    for (const statement of outboxDdl(this.config)) {
      await session.transaction((tx) => this.config.dialect.execute(tx, statement, []));
    }
  }
}

/**
 * Creates the transactional outbox of one database: `outbox.add(tx, message)` inside the business
 * transaction, `outbox.migrate(pool)` once to create its tables, and a relay (`createRelay`) to
 * publish what committed.
 */
export function createOutbox<Tx>(config: OutboxConfig<Tx>): Outbox<Tx> {
  return new SqlOutbox(config);
}
