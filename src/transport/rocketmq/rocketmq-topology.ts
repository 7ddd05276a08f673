import { ConfigError } from '../../core/errors.js';
import { RocketMQAdmin, type RocketMQMessageType } from './rocketmq-admin.js';
import type { RocketMQSettings } from './rocketmq-config.js';
import { deadLetterTopic } from './rocketmq-names.js';
import type { StartPosition } from '../transport.js';

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
   * Gives `group` an offset on every queue of `topic` where it has none: the queue's first (`earliest`)
   * or next (`now`) one, so a new group starts where it asked rather than where the broker's own rule
   * for a group without an offset would put it (the last message of each queue, or the first when the
   * queue is still in memory). A queue with an offset keeps it.
   */
  async start(group: string, topic: string, from: StartPosition): Promise<void> {
    for (const { master, queues } of await this.admin.queues(topic)) {
      for (let queueId = 0; queueId < queues; queueId++) {
        if ((await this.admin.consumerOffset(master, group, topic, queueId)) !== undefined) continue;
        const offset = await this.admin.queueOffset(master, from === 'now' ? 'max' : 'min', topic, queueId);
        await this.admin.commitOffset(master, group, topic, queueId, offset);
      }
    }
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
