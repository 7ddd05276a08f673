import { errorText, TransportUnavailableError } from '../../core/errors.js';
import type { RocketMQSettings } from './rocketmq-config.js';
import {
  CLIENT_NAMESPACE,
  clientLogger,
  type ProducerLike,
  type RocketMQDriver,
  type SendReceiptLike,
} from './rocketmq-driver.js';
import type { RocketMQTopology } from './rocketmq-topology.js';

/** A send: properties as a record, the rest as the client takes it. */
export interface RocketMQSend {
  readonly topic: string;
  readonly body: Buffer;
  readonly properties: Readonly<Record<string, string>>;
  readonly keys?: readonly string[];
  readonly messageGroup?: string | undefined;
}

/**
 * The transport's producer, started on the first send. The client sends again on its own (three
 * attempts, the same message id); a send that still fails is a `TransportUnavailableError`.
 */
export class RocketMQPublisher {
  readonly #driver: RocketMQDriver;
  readonly #settings: RocketMQSettings;
  readonly #topology: RocketMQTopology;
  #producer: Promise<ProducerLike> | undefined;

  constructor(driver: RocketMQDriver, settings: RocketMQSettings, topology: RocketMQTopology) {
    this.#driver = driver;
    this.#settings = settings;
    this.#topology = topology;
  }

  #start(): Promise<ProducerLike> {
    this.#producer ??= (async () => {
      const { endpoints, requestTimeoutMs, logger } = this.#settings;
      const producer = this.#driver.producer(
        {
          endpoints,
          namespace: CLIENT_NAMESPACE,
          requestTimeout: requestTimeoutMs,
          logger: clientLogger(logger),
        },
        logger,
      );
      await producer.startup();
      return producer;
    })().catch((error: unknown) => {
      this.#producer = undefined;
      throw new TransportUnavailableError(
        `RocketMQ: cannot start a producer at ${this.#settings.endpoints}: ${errorText(error)}`,
        {
          cause: error,
        },
      );
    });
    return this.#producer;
  }

  async send(message: RocketMQSend): Promise<SendReceiptLike> {
    await this.#topology.topic(message.topic, message.topic.startsWith('%DLQ%') ? 'NORMAL' : undefined);
    const producer = await this.#start();
    try {
      return await producer.send({
        topic: message.topic,
        body: message.body,
        properties: new Map(Object.entries(message.properties)),
        keys: [...(message.keys ?? [])],
        ...(message.messageGroup === undefined ? {} : { messageGroup: message.messageGroup }),
      });
    } catch (error) {
      throw new TransportUnavailableError(
        `RocketMQ: sending to ${message.topic} failed: ${errorText(error)}`,
        {
          cause: error,
        },
      );
    }
  }

  async close(): Promise<void> {
    const producer = await this.#producer?.catch(() => undefined);
    this.#producer = undefined;
    await producer?.shutdown().catch(() => undefined);
  }
}
