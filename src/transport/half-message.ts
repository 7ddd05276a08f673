// RocketMQ-style half messages: the shapes the local broker, RocketMQ and the outbox's transactional
// send share.
import type { Duration } from '../core/duration.js';
import type { PublishReceipt } from './transport.js';

/** The state of a local transaction, as RocketMQ's `LocalTransactionState`. */
export type TransactionState = 'COMMIT' | 'ROLLBACK' | 'UNKNOWN';

/**
 * A half message as the local transaction and the check-back callback see it. `Id` is the type of
 * the broker's half-message id: a number on the local broker, RocketMQ's message id (a string) there.
 */
export interface HalfMessageView<Id extends number | string = number> {
  /** The broker's id of the half message. */
  readonly id: Id;
  /** The topic it goes to once committed. */
  readonly topic: string;
  /** Its business key (the `oncemq-key` header), to look the business row up by. */
  readonly key: string | undefined;
  /** The producer's unique id of the send. */
  readonly uniqueId: string;
  /** Its headers. */
  readonly headers: Readonly<Record<string, string>>;
  /** Its body. */
  readonly body: Uint8Array;
  /** Check-backs made before this one. */
  readonly checks: number;
}

/** Input of `broker.createTransactionProducer(config)`: the producer group and its check-back. */
export interface TransactionProducerConfig {
  /** Producer group: check-backs of its half messages go to this producer. */
  readonly group: string;
  /** Asked about an undecided half message: did its local transaction commit? Throwing counts as UNKNOWN. */
  readonly check: (message: HalfMessageView) => TransactionState | Promise<TransactionState>;
  /** Time between a half message's check-backs (the first one included). @default '60s' */
  readonly checkInterval?: Duration;
  /** Check-backs before an undecided half message is moved to the check-max topic. @default 15 */
  readonly maxChecks?: number;
}

/** Defaults of {@link TransactionProducerConfig}, RocketMQ's. */
export const DEFAULT_TRANSACTION_PRODUCER_CONFIG = Object.freeze({
  /** A minute between check-backs. */
  checkInterval: '60s',
  /** Check-backs before an undecided half message is moved aside. */
  maxChecks: 15,
} as const);

/** What became of a transactional send; `Id` as in {@link HalfMessageView}. */
export interface TransactionSendResult<Id extends number | string = number> {
  /** What the local transaction answered: `COMMIT`, `ROLLBACK`, or `UNKNOWN` (left to the check-back). */
  readonly state: TransactionState;
  /** The broker's id of the half message. */
  readonly halfId: Id;
  /** Present once committed: the copy consumers will see. */
  readonly receipt?: PublishReceipt;
}
