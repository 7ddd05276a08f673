import { ConfigError, errorText } from '../core/errors.js';
import { toLogger, type Logger, type LoggerLike } from '../core/logger.js';
import type { SqlDialect } from '../ledger/sql-dialect.js';
import type {
  HalfMessageView,
  TransactionProducerConfig,
  TransactionSendResult,
  TransactionState,
} from '../transport/half-message.js';
import type { OutgoingMessage, PublishReceipt, Transport } from '../transport/transport.js';
import { openOutboxSession, type OutboxDatabase, type OutboxSession } from './outbox-database.js';
import type { Outbox } from './outbox.js';

/**
 * A native transactional (half-message) producer, as the local broker's `TransactionProducer` is and
 * as a RocketMQ adapter's is to be: stores a half message, runs the local transaction, commits or
 * rolls back by its answer, checks back undecided ones.
 */
export interface HalfMessageProducer {
  /**
   * Stores `message` as a half message, runs `localTx`, and commits the half message (the broker
   * delivers it) or rolls it back by the state `localTx` answers; `UNKNOWN`, or a throw, leaves it to
   * the check-back.
   */
  sendInTransaction(
    message: OutgoingMessage,
    localTx: (message: HalfMessageView) => TransactionState | Promise<TransactionState>,
  ): Promise<TransactionSendResult>;
  /** Stops the producer and its check-backs. */
  close(): void | Promise<void>;
}

/** A transport with the `halfMessages` capability hands out native producers through this. */
export interface HalfMessageTransport extends Transport {
  /** A producer of half messages in `config.group`, whose check-backs call `config.check`. */
  createTransactionProducer(config: TransactionProducerConfig): Promise<HalfMessageProducer>;
}

/**
 * Input of `createTransactionalSender(config)`: the transport, the database of the local
 * transaction, and the outbox (for transports without half messages) or `check` (for those with).
 */
export interface TransactionalSenderConfig<Tx> {
  /** Where the message goes; its `halfMessages` capability decides between half messages and the outbox. */
  readonly transport: Transport;
  /** Where the local transaction runs: a pg or mysql2 pool, or a better-sqlite3 database. */
  readonly database: OutboxDatabase;
  /** Carries the message on a transport without half messages (and gives the database's dialect). */
  readonly outbox?: Outbox<Tx>;
  /** The database's dialect, when no outbox is given (a transport with half messages needs none). */
  readonly dialect?: SqlDialect<Tx>;
  /** Producer group of the native half messages; their check-backs go to it. @default 'oncemq-producer' */
  readonly group?: string;
  /**
   * Native half messages: asked about a half message whose local transaction's end is unknown (the
   * process died between the commit and the broker's answer): look the business row up and say
   * COMMIT, ROLLBACK or UNKNOWN. Unused with the outbox, whose row commits with the transaction.
   */
  readonly check?: (message: HalfMessageView) => TransactionState | Promise<TransactionState>;
  /** Native half messages: wait between check-backs. @default the producer's ('60s') */
  readonly checkInterval?: TransactionProducerConfig['checkInterval'];
  /**
   * Where a failure to close the producer is logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** What became of `sendInTransaction`. */
export interface TransactionalSendResult<R> {
  /** `half-message` on a transport with native half messages, else `outbox`. */
  readonly via: 'half-message' | 'outbox';
  /** How the message ended: `COMMIT` (it goes out), `ROLLBACK` (it never does) or `UNKNOWN` (left to the check-back). */
  readonly state: TransactionState;
  /** The local transaction's value. */
  readonly value: R;
  /** Half message: the broker's receipt once committed. */
  readonly receipt?: PublishReceipt;
  /** Outbox: the row's id (its `oncemq-outbox-id` header); the relay publishes it. */
  readonly outboxId?: string;
}

function isHalfMessageTransport(transport: Transport): transport is HalfMessageTransport {
  return (
    transport.capabilities.halfMessages &&
    typeof (transport as Partial<HalfMessageTransport>).createTransactionProducer === 'function'
  );
}

/**
 * One API for a message that must go out exactly when a local transaction commits. On a transport
 * with native half messages (the local broker; RocketMQ) the message is a half message committed or
 * rolled back by the transaction's end, and checked back through `check` when that end is unknown.
 * On every other transport the message is written through the outbox in the same database
 * transaction, and the relay publishes it after the commit.
 */
export class TransactionalSender<Tx> {
  /** How this sender carries messages: `half-message` when the transport has native half messages, else `outbox`. */
  readonly via: 'half-message' | 'outbox';
  readonly #session: OutboxSession<Tx>;
  readonly #outbox: Outbox<Tx> | undefined;
  readonly #native: Promise<HalfMessageProducer> | undefined;
  readonly #logger: Logger;

  constructor(config: TransactionalSenderConfig<Tx>) {
    const dialect = config.outbox?.dialect ?? config.dialect;
    if (dialect === undefined)
      throw new ConfigError('dialect', 'give the outbox, or the dialect of the database');
    this.#session = openOutboxSession(dialect, config.database, true);
    this.#outbox = config.outbox;
    this.#logger = toLogger(config.logger);
    const transport = config.transport;
    if (isHalfMessageTransport(transport)) {
      if (typeof config.check !== 'function') {
        throw new ConfigError(
          'check',
          `the ${transport.name} transport sends half messages: give check(message) to decide the ones whose transaction end is unknown`,
        );
      }
      this.via = 'half-message';
      this.#native = transport.createTransactionProducer({
        group: config.group ?? 'oncemq-producer',
        check: config.check,
        ...(config.checkInterval === undefined ? {} : { checkInterval: config.checkInterval }),
      });
      this.#native.catch(() => undefined);
    } else {
      if (config.outbox === undefined) {
        throw new ConfigError(
          'outbox',
          `the ${transport.name} transport has no half messages: give an outbox (createOutbox) and run a relay`,
        );
      }
      this.via = 'outbox';
      this.#native = undefined;
    }
  }

  /**
   * Runs `localTx` in a transaction of the database and sends `message` if and only if it commits.
   * A throw rolls the transaction back, nothing is sent, and the error is rethrown.
   */
  async sendInTransaction<R>(
    message: OutgoingMessage,
    localTx: (tx: Tx) => Promise<R> | R,
  ): Promise<TransactionalSendResult<R>> {
    if (this.#native === undefined) return this.#viaOutbox(message, localTx);
    const producer = await this.#native;
    let value: R | undefined;
    let failure: { error: unknown } | undefined;
    const result = await producer.sendInTransaction(message, async () => {
      try {
        value = await this.#session.transaction(async (tx) => localTx(tx));
        return 'COMMIT';
      } catch (error) {
        failure = { error };
        return 'ROLLBACK';
      }
    });
    if (failure !== undefined) throw failure.error;
    return {
      via: 'half-message',
      state: result.state,
      value: value as R,
      ...(result.receipt === undefined ? {} : { receipt: result.receipt }),
    };
  }

  async #viaOutbox<R>(
    message: OutgoingMessage,
    localTx: (tx: Tx) => Promise<R> | R,
  ): Promise<TransactionalSendResult<R>> {
    const outbox = this.#outbox as Outbox<Tx>;
    if (message.key === undefined) {
      throw new ConfigError('key', 'a message sent through the outbox needs its business key');
    }
    const { value, id } = await this.#session.transaction(async (tx) => {
      const value = await localTx(tx);
      const entry = await outbox.add(tx, {
        topic: message.topic,
        key: message.key as string,
        body: message.body,
        ...(message.orderingKey === undefined ? {} : { orderingKey: message.orderingKey }),
        ...(message.headers === undefined ? {} : { headers: message.headers }),
      });
      return { value, id: entry.id };
    });
    return { via: 'outbox', state: 'COMMIT', value, outboxId: id };
  }

  /** Closes the half-message producer, if any; the database and the transport stay the caller's. */
  async close(): Promise<void> {
    if (this.#native === undefined) return;
    try {
      await (await this.#native).close();
    } catch (error) {
      this.#logger.warn('oncemq: closing the transaction producer failed', { error: errorText(error) });
    }
  }
}

/** Creates a {@link TransactionalSender}: half messages where the transport has them, the outbox elsewhere. */
export function createTransactionalSender<Tx>(
  config: TransactionalSenderConfig<Tx>,
): TransactionalSender<Tx> {
  return new TransactionalSender(config);
}
