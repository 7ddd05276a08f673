/**
 * The transport contract: what oncemq needs from a broker adapter. Core only — no I/O, no driver.
 * The local broker implements it; RabbitMQ, NATS JetStream and Redis Streams adapters will too.
 */
import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { Outcome } from '../core/outcome.js';

/** Header carrying the producer's unique id of a send, kept across its retries (RocketMQ's `UNIQ_KEY`). */
export const UNIQUE_ID_HEADER = 'oncemq-unique-id';

/** What a transport can do natively. The core branches on these, never on a transport's name. */
export interface TransportCapabilities {
  /** Redelivers a retried message after `outcome.delayMs` (else the delay is approximated or zero). */
  readonly delay: boolean;
  /** Keeps dead-lettered messages with their reason, listable and replayable. */
  readonly deadLetter: boolean;
  /** Delivers messages of one ordering key one at a time, in publish order, retries included. */
  readonly ordering: boolean;
  /** Window in which the broker itself drops a republished copy; 0 when it has none. */
  readonly brokerDedupWindowMs: number;
  /** Transactional (half) messages with check-back. */
  readonly halfMessages: boolean;
  /** Hands several messages to the consumer at once (a pipeline's `processBatch` can take them). */
  readonly batch: boolean;
}

/** Capabilities a transport has unless it says otherwise. */
export const DEFAULT_TRANSPORT_CAPABILITIES: TransportCapabilities = Object.freeze({
  delay: false,
  deadLetter: false,
  ordering: false,
  brokerDedupWindowMs: 0,
  halfMessages: false,
  batch: false,
});

/** A message to publish. */
export interface OutgoingMessage {
  readonly topic: string;
  /** Bytes as they are, text as UTF-8, anything else as JSON. */
  readonly body: Uint8Array | string | object;
  /** The business key, carried in the `oncemq-key` header; keep it the same when you resend. */
  readonly key?: string;
  /** Messages with the same ordering key go to the same queue. */
  readonly orderingKey?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** The broker's confirm of a stored message. */
export interface PublishReceipt {
  /** Broker id of the copy the confirm was received for. */
  readonly brokerId: string;
  readonly topic: string;
  readonly queue: number;
  /** The producer's unique id of the send, the same for every copy a resend stored. */
  readonly uniqueId: string;
}

/**
 * Turns a delivery into an {@link Outcome}; a pipeline is one. The transport acts on `outcome.action`:
 * `ack`, `retry` after `delayMs`, or `dead-letter` with the reason. Nothing is acked before that.
 */
export interface Processor {
  process(envelope: Envelope): Promise<Outcome>;
  /** Optional: processes a batch at once, one outcome per envelope in order. */
  processBatch?(envelopes: readonly Envelope[]): Promise<readonly Outcome[]>;
}

/** A pipeline, any object with `process`, or a bare function of the envelope. */
export type ProcessorLike = Processor | ((envelope: Envelope) => Promise<Outcome>);

/** Normalizes a {@link ProcessorLike}. */
export function toProcessor(target: ProcessorLike): Processor {
  if (typeof target === 'function') return { process: target };
  if (typeof (target as Partial<Processor> | null)?.process !== 'function') {
    throw new ConfigError(
      'processor',
      'expected a pipeline, an object with process(envelope), or a function',
    );
  }
  return target;
}

/** A running subscription of one consumer (one member of the group). */
export interface Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  /** Stops pulling, waits for the delivery in progress, commits what was processed, leaves the group. */
  close(): Promise<void>;
}

export interface Transport {
  /** Transport name, for logs and metrics. */
  readonly name: string;
  readonly capabilities: TransportCapabilities;
  /** Publishes and resolves once the broker confirmed that the message is stored. */
  publish(message: OutgoingMessage): Promise<PublishReceipt>;
  /**
   * Joins consumer group `group` on `topics` and drives `processor` with every delivery, acting on
   * each outcome's action. Several subscriptions of one group share the work.
   */
  subscribe(group: string, topics: readonly string[], processor: ProcessorLike): Promise<Subscription>;
  /** Closes every subscription and the connection. */
  close(): Promise<void>;
}
