import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import type { HalfMessageView, TransactionSendResult, TransactionState } from '../half-message.js';
import type { OutgoingMessage } from '../transport.js';
import type { RocketMQSettings } from './rocketmq-config.js';
import {
  CLIENT_NAMESPACE,
  clientLogger,
  TransactionResolution,
  type MessageViewLike,
  type ProducerLike,
  type RocketMQDriver,
} from './rocketmq-driver.js';
import { validRocketMQTopic } from './rocketmq-names.js';
import type { RocketMQTopology } from './rocketmq-topology.js';

/** Property naming the producer group of a half message (RocketMQ 5's gRPC producers have no group of their own). */
export const PRODUCER_GROUP_PROPERTY = 'oncemq-producer-group';

/**
 * The local broker's `TransactionProducerConfig`, on RocketMQ: the same names, the same
 * `TransactionState`, the half message's id a string (RocketMQ's message id).
 */
export interface RocketMQTransactionProducerConfig {
  /** Producer group: named on each half message; a check-back goes to a producer of the topic. */
  readonly group: string;
  /** Asked about an undecided half message: did its local transaction commit? Throwing counts as UNKNOWN. */
  readonly check: (message: HalfMessageView<string>) => TransactionState | Promise<TransactionState>;
  /**
   * Not settable here: RocketMQ's broker decides when it checks back (`transactionTimeOut`, then every
   * `transactionCheckInterval`); setting it is a `ConfigError` naming those.
   */
  readonly checkInterval?: never;
  /** Not settable here: the broker's `transactionCheckMax` (15 by default); setting it is a `ConfigError`. */
  readonly maxChecks?: never;
  /**
   * Topics whose check-backs this producer answers from its start (before its first send): the proxy
   * sends a check-back to a producer that declared the half's topic. A producer that takes over from
   * one that crashed names them here. @default none (topics are added as they are sent to)
   */
  readonly topics?: readonly string[];
}

const STATES: readonly unknown[] = ['COMMIT', 'ROLLBACK', 'UNKNOWN'];

function headersOf(properties: Map<string, string>): Record<string, string> {
  return Object.fromEntries(properties);
}

function view(message: MessageViewLike): HalfMessageView<string> {
  const headers = headersOf(message.properties);
  const checks = Number(message.properties.get('TRANSACTION_CHECK_TIMES') ?? 0);
  return {
    id: message.messageId,
    topic: message.topic,
    key: headers[KEY_HEADER],
    uniqueId: message.messageId,
    headers,
    body: Uint8Array.from(message.body),
    checks: Number.isInteger(checks) ? checks : 0,
  };
}

/**
 * RocketMQ's transactional producer with the local broker's API: `sendInTransaction` stores a half
 * message consumers cannot see, runs the local transaction, then commits (the message becomes
 * visible) or rolls back. An undecided one is checked back by the broker through `check`.
 */
export class RocketMQTransactionProducer {
  /** The producer group; the broker checks its undecided half messages back through it. */
  readonly group: string;
  readonly #config: RocketMQTransactionProducerConfig;
  readonly #settings: RocketMQSettings;
  readonly #topology: RocketMQTopology;
  readonly #producer: ProducerLike;

  /** @internal made by the transport's `createTransactionProducer()` */
  constructor(
    driver: RocketMQDriver,
    settings: RocketMQSettings,
    topology: RocketMQTopology,
    config: RocketMQTransactionProducerConfig,
  ) {
    if (typeof config.group !== 'string' || config.group === '')
      throw new ConfigError('group', 'name the producer group');
    if (typeof config.check !== 'function') {
      throw new ConfigError('check', 'must be a function returning COMMIT, ROLLBACK or UNKNOWN');
    }
    const loose = config as { readonly checkInterval?: unknown; readonly maxChecks?: unknown };
    if (loose.checkInterval !== undefined) {
      throw new ConfigError(
        'checkInterval',
        "RocketMQ's broker decides it: set transactionTimeOut and transactionCheckInterval in broker.conf",
      );
    }
    if (loose.maxChecks !== undefined) {
      throw new ConfigError(
        'maxChecks',
        "RocketMQ's broker decides it: set transactionCheckMax in broker.conf",
      );
    }
    for (const topic of config.topics ?? []) validRocketMQTopic(topic);
    this.group = config.group;
    this.#config = config;
    this.#settings = settings;
    this.#topology = topology;
    this.#producer = driver.producer(
      {
        endpoints: settings.endpoints,
        namespace: CLIENT_NAMESPACE,
        requestTimeout: settings.requestTimeoutMs,
        logger: clientLogger(settings.logger),
        topics: (config.topics ?? []).map((topic) => settings.names.toBroker(topic)),
        checker: { check: (message) => this.#checkBack(message) },
      },
      settings.logger,
    );
  }

  /** @internal started by the transport */
  async start(): Promise<void> {
    for (const topic of this.#config.topics ?? [])
      await this.#topology.topic(this.#settings.names.toBroker(topic), 'TRANSACTION');
    try {
      await this.#producer.startup();
    } catch (error) {
      throw new TransportUnavailableError(
        `RocketMQ: cannot start a transaction producer: ${errorText(error)}`,
        {
          cause: error,
        },
      );
    }
  }

  async #checkBack(message: MessageViewLike): Promise<number> {
    let state: TransactionState;
    try {
      const half = view(message);
      state = await this.#config.check({ ...half, topic: this.#settings.names.fromBroker(half.topic) });
    } catch (error) {
      this.#settings.logger.warn('oncemq: transaction check-back threw; counted as UNKNOWN', {
        group: this.group,
        error: errorText(error),
      });
      return TransactionResolution.UNKNOWN;
    }
    if (state === 'COMMIT') return TransactionResolution.COMMIT;
    if (state === 'ROLLBACK') return TransactionResolution.ROLLBACK;
    return TransactionResolution.UNKNOWN;
  }

  /**
   * Stores `message` as a half message (on a `TRANSACTION` topic), runs `localTx`, and ends the half
   * message by its answer. A throwing local transaction counts as UNKNOWN: the check-back decides later.
   */
  async sendInTransaction(
    message: OutgoingMessage,
    localTx: (message: HalfMessageView<string>) => TransactionState | Promise<TransactionState>,
  ): Promise<TransactionSendResult<string>> {
    const topic = validRocketMQTopic(this.#settings.names.toBroker(validRocketMQTopic(message.topic)));
    await this.#topology.topic(topic, 'TRANSACTION');
    const headers: Record<string, string> = { ...message.headers, [PRODUCER_GROUP_PROPERTY]: this.group };
    if (message.key !== undefined) headers[KEY_HEADER] = message.key;
    if (message.orderingKey !== undefined) headers[ORDERING_KEY_HEADER] = message.orderingKey;
    const body = Buffer.from(encodeBody(message.body));
    const transaction = this.#producer.beginTransaction();
    let receipt;
    try {
      receipt = await this.#producer.send(
        {
          topic,
          body,
          properties: new Map(Object.entries(headers)),
          keys: message.key === undefined ? [] : [message.key],
        },
        transaction,
      );
    } catch (error) {
      throw new TransportUnavailableError(
        `RocketMQ: sending a half message to ${topic} failed: ${errorText(error)}`,
        {
          cause: error,
        },
      );
    }
    const half: HalfMessageView<string> = {
      id: receipt.messageId,
      topic: message.topic,
      key: message.key,
      uniqueId: receipt.messageId,
      headers,
      body,
      checks: 0,
    };
    let state: TransactionState;
    try {
      state = await localTx(half);
    } catch (error) {
      this.#settings.logger.warn('oncemq: local transaction threw; its half message waits for a check-back', {
        group: this.group,
        error: errorText(error),
      });
      state = 'UNKNOWN';
    }
    if (!STATES.includes(state)) {
      throw new ConfigError(
        'localTx',
        `must return COMMIT, ROLLBACK or UNKNOWN, got ${JSON.stringify(state)}`,
      );
    }
    if (state === 'UNKNOWN') return { state, halfId: half.id };
    if (state === 'ROLLBACK') {
      await transaction.rollback();
      return { state, halfId: half.id };
    }
    await transaction.commit();
    return {
      state,
      halfId: half.id,
      receipt: { brokerId: receipt.messageId, topic: message.topic, messageId: receipt.messageId },
    };
  }

  /** Stops answering check-backs (another producer of the topic answers them). */
  async close(): Promise<void> {
    await this.#producer.shutdown().catch(() => undefined);
  }
}
