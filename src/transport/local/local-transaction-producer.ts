import { parseDuration } from '../../core/duration.js';
import { ConfigError, errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { tracePublish } from '../../telemetry/trace-publish.js';
import type { OutgoingMessage } from '../transport.js';
import { CHECK_MAX_TOPIC } from './local-names.js';
import type { HalfMessage } from './local-half-message-store.js';
import {
  DEFAULT_TRANSACTION_PRODUCER_CONFIG,
  type HalfMessageView,
  type TransactionProducerConfig,
  type TransactionSendResult,
  type TransactionState,
} from '../half-message.js';
import type { LocalBroker } from './local-transport.js';
import type { LocalPublisher } from './local-publisher.js';

const view = (half: HalfMessage): HalfMessageView => ({
  id: half.id,
  topic: half.topic,
  key: half.headers['oncemq-key'],
  uniqueId: half.uniqueId,
  headers: half.headers,
  body: half.body,
  checks: half.checks,
});

/**
 * RocketMQ's transactional producer: `sendInTransaction` stores a half message consumers cannot
 * see, runs the local transaction, then commits (the message becomes visible) or rolls back (it is
 * discarded). An undecided one is checked back every `checkInterval`, at most `maxChecks` times,
 * then moved aside to `TRANS_CHECK_MAX_TIME_TOPIC` with a log line.
 */
export class TransactionProducer {
  /** The producer group. */
  readonly group: string;
  /** Time between a half message's check-backs, in milliseconds. */
  readonly checkIntervalMs: number;
  /** Check-backs before an undecided half message is moved aside. */
  readonly maxChecks: number;
  readonly #broker: LocalBroker;
  readonly #publisher: LocalPublisher;
  readonly #check: TransactionProducerConfig['check'];
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | undefined;
  #checking: Promise<number> | undefined;

  constructor(
    broker: LocalBroker,
    publisher: LocalPublisher,
    config: TransactionProducerConfig,
    logger: Logger,
  ) {
    if (typeof config.group !== 'string' || config.group === '')
      throw new ConfigError('group', 'name the producer group');
    if (typeof config.check !== 'function')
      throw new ConfigError('check', 'must be a function returning COMMIT, ROLLBACK or UNKNOWN');
    this.group = config.group;
    this.checkIntervalMs = parseDuration(
      config.checkInterval ?? DEFAULT_TRANSACTION_PRODUCER_CONFIG.checkInterval,
      'checkInterval',
    );
    if (this.checkIntervalMs < 1) throw new ConfigError('checkInterval', 'must be at least 1ms');
    this.maxChecks = config.maxChecks ?? DEFAULT_TRANSACTION_PRODUCER_CONFIG.maxChecks;
    if (!Number.isInteger(this.maxChecks) || this.maxChecks < 1) {
      throw new ConfigError('maxChecks', `must be a whole number >= 1, got ${this.maxChecks}`);
    }
    this.#broker = broker;
    this.#publisher = publisher;
    this.#check = config.check;
    this.#logger = logger;
  }

  /** @internal started by the broker */
  start(): void {
    const tick = Math.min(1000, Math.max(5, Math.floor(this.checkIntervalMs / 2)));
    this.#timer = setInterval(() => {
      void this.checkNow().catch((error: unknown) => {
        this.#logger.warn('oncemq: transaction check-back failed', {
          group: this.group,
          error: errorText(error),
        });
      });
    }, tick);
    this.#timer.unref();
  }

  /**
   * Stores `message` as a half message, runs `localTx`, and ends the half message by its answer.
   * A throwing local transaction counts as UNKNOWN: the check-back decides later.
   */
  sendInTransaction(
    message: OutgoingMessage,
    localTx: (message: HalfMessageView) => TransactionState | Promise<TransactionState>,
  ): Promise<TransactionSendResult> {
    return tracePublish(this.#broker.name, message, (traced) => this.#send(traced, localTx));
  }

  async #send(
    message: OutgoingMessage,
    localTx: (message: HalfMessageView) => TransactionState | Promise<TransactionState>,
  ): Promise<TransactionSendResult> {
    await this.#broker.init();
    const store = this.#broker.store;
    const prepared = this.#publisher.prepare(message);
    const id = store.halfMessages.prepare(this.group, prepared, store.now() + this.checkIntervalMs);
    let state: TransactionState;
    try {
      state = await localTx(view({ id, producerGroup: this.group, ...prepared, checks: 0 }));
    } catch (error) {
      this.#logger.warn('oncemq: local transaction threw; its half message waits for a check-back', {
        group: this.group,
        error: errorText(error),
      });
      state = 'UNKNOWN';
    }
    return this.#end(id, prepared.topic, prepared.queueId, prepared.uniqueId, state);
  }

  #end(
    id: number,
    topic: string,
    queue: number,
    uniqueId: string,
    state: TransactionState,
  ): TransactionSendResult {
    if (state === 'UNKNOWN') return { state, halfId: id };
    if (!(['COMMIT', 'ROLLBACK'] as unknown[]).includes(state)) {
      throw new ConfigError(
        'localTx',
        `must return COMMIT, ROLLBACK or UNKNOWN, got ${JSON.stringify(state)}`,
      );
    }
    const ended = this.#broker.store.halfMessages.end(id, state === 'COMMIT' ? 'commit' : 'rollback');
    if (state === 'COMMIT' && ended?.commitOffset != null) {
      return {
        state,
        halfId: id,
        receipt: this.#publisher.receipt(ended.commitOffset, topic, queue, uniqueId),
      };
    }
    return { state, halfId: id };
  }

  /** Runs one round of check-backs for the due half messages now; returns how many were checked. */
  checkNow(): Promise<number> {
    this.#checking ??= this.#sweep().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  async #sweep(): Promise<number> {
    const store = this.#broker.store;
    const due = store.halfMessages.due(this.group, 100);
    for (const half of due) {
      let state: TransactionState;
      try {
        state = await this.#check(view(half));
      } catch (error) {
        this.#logger.warn('oncemq: transaction check-back threw; counted as UNKNOWN', {
          group: this.group,
          error: errorText(error),
        });
        state = 'UNKNOWN';
      }
      if (state === 'COMMIT' || state === 'ROLLBACK') {
        this.#end(half.id, half.topic, half.queueId, half.uniqueId, state);
        continue;
      }
      const checks = store.halfMessages.recordCheck(half.id, store.now() + this.checkIntervalMs);
      if (checks >= this.maxChecks) {
        this.#broker.queueCount(CHECK_MAX_TOPIC);
        store.halfMessages.end(half.id, 'aside');
        this.#logger.warn(
          `oncemq: half message still undecided after ${checks} check-backs; moved to ${CHECK_MAX_TOPIC}`,
          { group: this.group, topic: half.topic, uniqueId: half.uniqueId, key: half.headers['oncemq-key'] },
        );
      }
    }
    return due.length;
  }

  /** Stops the check-backs; undecided half messages wait for the next producer of the group. */
  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
