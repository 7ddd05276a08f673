import { SQSClient } from '@aws-sdk/client-sqs';
import { parseDuration } from '../../core/duration.js';
import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { configObject, OPTIONAL_CONFIG } from '../config-checks.js';
import { unreachableCause, unreachableMessage } from '../../core/unreachable.js';
import { tracePublish } from '../../telemetry/trace-publish.js';
import { UnchargedRetries } from '../uncharged-retries.js';
import { checkSubscribe } from '../subscribe-options.js';
import {
  DEFAULT_SUBSCRIBE_OPTIONS,
  toProcessor,
  type OutgoingMessage,
  type ProcessorLike,
  type PublishReceipt,
  type SubscribeOptions,
  type Transport,
  type TransportCapabilities,
} from '../transport.js';
import { sqsSettings, type SqsSettings, type SqsTransportConfig } from './sqs-config.js';
import type { DeadLetters } from '../dead-letters.js';
import { SqsDeadLetters } from './sqs-dead-letters.js';
import { SqsRedriveDeadLetters } from './sqs-redrive-dead-letters.js';
import { SqsOrderedLane } from './sqs-ordered-subscription.js';
import { SqsPublisher, validSqsTopic } from './sqs-publisher.js';
import { SqsSettler } from './sqs-settler.js';
import { SQS_MAX_RECEIVE, SqsSubscription, type SqsQueue } from './sqs-subscription.js';
import { SqsTopology } from './sqs-topology.js';

/** FIFO queues drop a message whose deduplication id they saw in the last 5 minutes. */
const FIFO_DEDUP_WINDOW_MS = 5 * 60_000;

/** Socket errors of a connection cut under a call (the SDK sends the call again, up to its attempts). */
const CUT_CODES: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE']);

const SQS_UNREACHABLE_HINT = 'start ElasticMQ with `npm run brokers -- start`, or check endpoint and region';

/**
 * Amazon SQS (or an SQS-compatible server such as ElasticMQ) as a transport. Each topic has a log
 * queue keeping every publish, and each group a queue of its own on each topic it consumes; a publish
 * is stored in the log, then copied into every group's queue. docs/transports/sqs.md.
 */
export class SqsTransport implements Transport {
  readonly name = 'sqs';
  readonly capabilities: TransportCapabilities;
  readonly deadLetters: SqsDeadLetters;
  readonly #settings: SqsSettings;
  readonly #client: SQSClient;
  readonly #ownClient: boolean;
  readonly #topology: SqsTopology;
  readonly #publisher: SqsPublisher;
  readonly #subscriptions = new Set<SqsSubscription>();
  #closed = false;

  constructor(config: SqsTransportConfig = {}) {
    this.#settings = sqsSettings(configObject(config, 'config', OPTIONAL_CONFIG));
    const settings = this.#settings;
    this.#ownClient = settings.client === undefined;
    this.#client =
      settings.client ??
      new SQSClient({
        region: settings.region,
        ...(settings.endpoint === undefined ? {} : { endpoint: settings.endpoint }),
        // A copy: the SDK marks the object it is given (a frozen one makes every call throw).
        ...(settings.credentials === undefined ? {} : { credentials: { ...settings.credentials } }),
        maxAttempts: 3,
      });
    this.#topology = new SqsTopology(this.#client, settings);
    this.#publisher = new SqsPublisher(this.#client, settings, this.#topology);
    this.deadLetters = new SqsDeadLetters(this.#client, settings, this.#topology);
    this.capabilities = Object.freeze({
      delay: true,
      deadLetter: true,
      ordering: settings.fifo,
      brokerDedupWindowMs: settings.fifo ? FIFO_DEDUP_WINDOW_MS : 0,
      halfMessages: false,
      batch: true,
      keepAlive: true,
    });
  }

  /**
   * An endpoint that cannot be reached, as one line naming it and what to run; a connection cut under a
   * call the SDK's retries did not get through, as a `TransportUnavailableError` too (the caller tries
   * again, as after any outage); any other error as it is.
   */
  readonly #unreachable = (error: unknown): never => {
    const cut = (error as { code?: unknown } | null)?.code;
    if (typeof cut === 'string' && CUT_CODES.has(cut)) {
      throw new TransportUnavailableError(
        `the connection to SQS at ${this.#settings.endpoint ?? `sqs.${this.#settings.region}.amazonaws.com`} was cut (${cut}) on every attempt of a call; try again`,
        { cause: error },
      );
    }
    const down = unreachableCause(error);
    if (down === undefined) throw error;
    throw new TransportUnavailableError(
      unreachableMessage({
        server: 'SQS',
        url: this.#settings.endpoint ?? `sqs.${this.#settings.region}.amazonaws.com`,
        detail: down.message,
        hint: SQS_UNREACHABLE_HINT,
      }),
      { cause: error },
    );
  };

  publish(message: OutgoingMessage): Promise<PublishReceipt> {
    if (this.#closed) return Promise.reject(new TransportUnavailableError('the SQS transport is closed'));
    return tracePublish(this.name, message, (traced) =>
      this.#publisher.publish(traced).catch(this.#unreachable),
    );
  }

  subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options: SubscribeOptions = {},
  ): Promise<SqsSubscription> {
    return this.#subscribe(group, topics, processor, options).catch(this.#unreachable);
  }

  async #subscribe(
    group: string,
    topics: readonly string[],
    processorLike: ProcessorLike,
    options: SubscribeOptions,
  ): Promise<SqsSubscription> {
    const settings = this.#settings;
    const processor = toProcessor(processorLike);
    const ordered = options.ordering !== undefined;
    const { concurrency, batchSize, from, ordering } = checkSubscribe(group, topics, processor, options, {
      topic: validSqsTopic,
      maxBatchSize: SQS_MAX_RECEIVE,
      ...(ordered
        ? {
            noEarliest:
              'an ordered SQS group cannot start at the earliest message (its log queue keeps no order to copy in)',
          }
        : {}),
    });
    if (ordering !== undefined && !settings.fifo) {
      throw new ConfigError(
        'ordering',
        'per-key order on SQS needs FIFO queues: create the transport with fifo: true',
      );
    }
    const visibilityMs = parseDuration(
      options.visibility ?? DEFAULT_SUBSCRIBE_OPTIONS.visibility,
      'visibility',
    );
    if (visibilityMs < 1000 || visibilityMs > 12 * 3_600_000) {
      throw new ConfigError('visibility', 'must be from 1s to 12h (SQS visibility timeout)');
    }
    if (this.#closed) throw new TransportUnavailableError('the SQS transport is closed');
    const queues: SqsQueue[] = [];
    for (const topic of topics) {
      // The log first, so that a publish stored after the group queue exists reaches the group either way.
      await this.#topology.log(topic);
      const { url, created } = await this.#topology.group(topic, group);
      if (created && from === 'earliest') {
        const copied = await this.#publisher.copyLog(topic, url);
        settings.logger.debug('oncemq: a new SQS group starts at the earliest message of its topic', {
          group,
          topic,
          copied,
        });
      }
      queues.push({ url, topic });
    }
    const uncharged = new UnchargedRetries();
    const deadLetterUrl = this.#topology.deadLetters(group, true);
    deadLetterUrl.catch(() => undefined);
    const settler = new SqsSettler({
      client: this.#client,
      group,
      deadLetterUrl: () => deadLetterUrl,
      uncharged,
      failureBackoffMs: settings.failureBackoffMs,
    });
    const subscription = new SqsSubscription(group, topics, {
      ctx: { client: this.#client, group, visibilityMs, uncharged, logger: settings.logger, settler },
      client: this.#client,
      queues,
      processor,
      concurrency,
      batchSize,
      longPollSeconds: settings.longPollSeconds,
      failureBackoffMs: settings.failureBackoffMs,
      lane:
        ordering === undefined
          ? undefined
          : new SqsOrderedLane(processor, ordering, concurrency, settings.logger),
    });
    this.#subscriptions.add(subscription);
    subscription.onClose = () => this.#subscriptions.delete(subscription);
    subscription.start();
    return subscription;
  }

  /**
   * The dead letters of a queue that an SQS redrive policy fills (a source queue's
   * `RedrivePolicy.deadLetterTargetArn` names it): listed with reason `redrive: received more than
   * maxReceiveCount`, replayed to the queue each was moved from. Creates nothing.
   * @param queue the dead-letter queue's name
   */
  redriveDeadLetters(queue: string): DeadLetters {
    return new SqsRedriveDeadLetters(this.#client, this.#topology, queue);
  }

  /** Closes every subscription (each drains), then the client (unless it is the application's). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.close()));
    if (this.#ownClient) {
      try {
        this.#client.destroy();
      } catch (error) {
        this.#settings.logger.warn('oncemq: closing the SQS client failed', { error: errorText(error) });
      }
    }
  }
}
