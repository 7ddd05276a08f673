import { ConfigError } from '../../core/errors.js';
import { RocketMQAdmin, type RocketMQMessageType } from './rocketmq-admin.js';
import type { RocketMQSettings } from './rocketmq-config.js';
import { deadLetterTopic } from './rocketmq-names.js';

/**
 * The topics and groups a transport uses, made (topology `create`) or checked (`check`) once each
 * before the first send or receive: gRPC clients create neither, and a send to a topic the name
 * server does not route fails (and the proxy remembers the miss for about 20 s).
 */
export class RocketMQTopology {
  readonly admin: RocketMQAdmin;
  readonly #settings: RocketMQSettings;
  readonly #ready = new Map<string, Promise<void>>();

  constructor(settings: RocketMQSettings) {
    this.#settings = settings;
    this.admin = new RocketMQAdmin(settings.nameServer, settings.requestTimeoutMs);
  }

  /** The type of the topics this transport publishes to. */
  get messageType(): RocketMQMessageType {
    return this.#settings.fifo ? 'FIFO' : 'NORMAL';
  }

  #once(name: string, make: () => Promise<void>): Promise<void> {
    let ready = this.#ready.get(name);
    if (ready === undefined) {
      ready = make().catch((error: unknown) => {
        this.#ready.delete(name);
        throw error;
      });
      this.#ready.set(name, ready);
    }
    return ready;
  }

  /** A topic accepting `type` messages (the transport's type unless told). */
  topic(
    topic: string,
    type: RocketMQMessageType = this.messageType,
    queues = this.#settings.queues,
  ): Promise<void> {
    return this.#once(`topic:${topic}`, async () => {
      if (await this.admin.topicExists(topic)) return;
      if (this.#settings.topology === 'check') {
        throw new ConfigError(
          'topics',
          `RocketMQ topic ${topic} does not exist (topology 'check' creates nothing)`,
        );
      }
      await this.admin.createTopic({ topic, type, queues });
    });
  }

  /**
   * The subscription group with its `retryMaxTimes` (orderly on a FIFO transport), and its
   * `%DLQ%<group>` topic, where oncemq writes the dead letters it decides on.
   */
  group(group: string, retryMaxTimes: number): Promise<void> {
    return this.#once(`group:${group}`, async () => {
      if (this.#settings.topology === 'check') {
        if (!(await this.admin.groupExists(group))) {
          throw new ConfigError(
            'group',
            `RocketMQ subscription group ${group} does not exist (topology 'check' creates nothing)`,
          );
        }
      } else {
        await this.admin.createGroup({ group, orderly: this.#settings.fifo, retryMaxTimes });
      }
      await this.topic(deadLetterTopic(group), 'NORMAL', 1);
    });
  }
}
