import type { Admin } from '@platformatic/kafka';
import { ConfigError, errorText } from '../../core/errors.js';
import { TransportUnavailableError } from '../../core/errors.js';
import type { KafkaSettings } from './kafka-config.js';

function alreadyExists(error: unknown): boolean {
  return /TOPIC_ALREADY_EXISTS|already exists/i.test(errorText(error));
}

/**
 * The topics the transport uses: listed, created when missing (topology `create`), or only checked
 * (topology `check`, what the CLI tools use: a missing topic is an error, never created).
 */
export class KafkaTopology {
  readonly #known = new Set<string>();
  readonly #pending = new Map<string, Promise<void>>();

  constructor(
    readonly admin: Admin,
    readonly settings: KafkaSettings,
  ) {}

  /** Every topic of the cluster (internal ones left out). */
  async list(): Promise<readonly string[]> {
    try {
      return await this.admin.listTopics();
    } catch (error) {
      throw new TransportUnavailableError('kafka: cannot list topics', { cause: error });
    }
  }

  /** Whether `topic` exists. */
  async exists(topic: string): Promise<boolean> {
    if (this.#known.has(topic)) return true;
    const found = (await this.list()).includes(topic);
    if (found) this.#known.add(topic);
    return found;
  }

  /** Makes sure `topic` exists: created with the configured partitions, or checked under topology `check`. */
  ensure(topic: string): Promise<void> {
    if (this.#known.has(topic)) return Promise.resolve();
    let pending = this.#pending.get(topic);
    if (pending === undefined) {
      pending = this.#ensure(topic).finally(() => this.#pending.delete(topic));
      this.#pending.set(topic, pending);
    }
    return pending;
  }

  async #ensure(topic: string): Promise<void> {
    if (await this.exists(topic)) return;
    if (this.settings.topology === 'check') {
      throw new ConfigError(
        'topic',
        `Kafka topic '${topic}' does not exist, and topology 'check' creates nothing`,
      );
    }
    try {
      await this.admin.createTopics({ topics: [topic], partitions: this.settings.partitions, replicas: -1 });
    } catch (error) {
      if (!alreadyExists(error)) {
        throw new TransportUnavailableError(`kafka: cannot create topic '${topic}': ${errorText(error)}`, {
          cause: error,
        });
      }
    }
    await this.#waitForLeaders(topic);
    this.#known.add(topic);
  }

  /**
   * Waits until every partition of a new topic has a leader: a group that joins before would be
   * assigned none of them and, with this client, not rebalance when they appear.
   */
  async #waitForLeaders(topic: string): Promise<void> {
    const deadline = Date.now() + this.settings.timeoutMs;
    for (;;) {
      try {
        const metadata = await this.admin.metadata({ topics: [topic], forceUpdate: true });
        const partitions = metadata.topics.get(topic)?.partitions ?? [];
        if (partitions.length > 0 && partitions.every((partition) => partition.leader >= 0)) return;
      } catch {
        // Not known yet: asked again below.
      }
      if (Date.now() > deadline) {
        throw new TransportUnavailableError(
          `kafka: topic '${topic}' has no leader after ${this.settings.timeoutMs}ms`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
