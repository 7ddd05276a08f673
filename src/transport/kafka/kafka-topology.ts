import type { Admin } from '@platformatic/kafka';
import { ConfigError, errorText } from '../../core/errors.js';
import { TransportUnavailableError } from '../../core/errors.js';
import type { KafkaSettings } from './kafka-config.js';

/** Kafka's protocol error code for a topic that exists already (`TOPIC_ALREADY_EXISTS`). */
const TOPIC_ALREADY_EXISTS = 36;

/**
 * The errors `error` holds, itself first: `@platformatic/kafka` reports a topic's own error nested,
 * a `ProtocolError` (with `apiId` and `apiCode`) in the `errors` of the request's `ResponseError`,
 * itself in the `errors` of a `MultipleErrors` when the request was tried more than once.
 */
function nestedErrors(error: unknown, depth = 0): unknown[] {
  if (typeof error !== 'object' || error === null || depth > 8) return [error];
  const found: unknown[] = [error];
  const { errors, cause } = error as { errors?: unknown; cause?: unknown };
  if (Array.isArray(errors)) for (const inner of errors) found.push(...nestedErrors(inner, depth + 1));
  if (cause !== undefined) found.push(...nestedErrors(cause, depth + 1));
  return found;
}

/** Whether a CreateTopics failure says the topic exists (another client created it first), at any depth. */
function alreadyExists(error: unknown): boolean {
  return nestedErrors(error).some((inner) => {
    if (typeof inner !== 'object' || inner === null) return false;
    const { apiId, apiCode } = inner as { apiId?: unknown; apiCode?: unknown };
    return apiCode === TOPIC_ALREADY_EXISTS || apiId === 'TOPIC_ALREADY_EXISTS';
  });
}

/** The error's text, and the broker's reasons nested in it (`INVALID_REPLICATION_FACTOR: …`). */
function reasons(error: unknown): string {
  const nested = nestedErrors(error)
    .slice(1)
    .filter((inner): inner is { apiId: string; message: string } => {
      return typeof (inner as { apiId?: unknown } | null)?.apiId === 'string';
    })
    .map((inner) => `${inner.apiId}: ${inner.message}`);
  return nested.length === 0 ? errorText(error) : `${errorText(error)} (${[...new Set(nested)].join('; ')})`;
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
        throw new TransportUnavailableError(`kafka: cannot create topic '${topic}': ${reasons(error)}`, {
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
