import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { DeadLetter, DeadLetters } from './dead-letters.js';
import type { Processor } from './transport.js';

/** Namespaces: letters, digits, `_` and `-`, at most 64 (every broker's names take them). */
export const NAMESPACE_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * An application's namespace on a broker whose topic and group names belong to the whole cluster
 * (Kafka, RocketMQ): two applications that both use topic `orders` and group `points` would share
 * them. The namespace is the first word of both at the broker — `<namespace><separator>orders`, and
 * so of everything named after the group (retry and dead-letter topics) — while envelopes, receipts
 * and dead letters keep the application's own names. Without one, names are the broker's as they are.
 */
export class TransportNamespace {
  readonly #word: string | undefined;
  readonly #separator: string;

  /**
   * @param namespace the application's namespace, checked against {@link NAMESPACE_PATTERN}
   * @param separator what joins it to a name (Kafka `.`, RocketMQ `%` as its own namespaces do)
   */
  constructor(namespace: string | undefined, separator: string) {
    if (namespace !== undefined && !NAMESPACE_PATTERN.test(namespace)) {
      throw new ConfigError(
        'namespace',
        `${JSON.stringify(namespace)} must be 1 to 64 letters, digits, '_' or '-'`,
      );
    }
    this.#word = namespace;
    this.#separator = separator;
  }

  /** The namespace, `undefined` without one. */
  get name(): string | undefined {
    return this.#word;
  }

  /** The broker's name of an application's topic or group. */
  toBroker(name: string): string {
    return this.#word === undefined ? name : `${this.#word}${this.#separator}${name}`;
  }

  /** The application's name of a broker's topic or group (one outside the namespace as it is). */
  fromBroker(name: string): string {
    const start = `${this.#word ?? ''}${this.#separator}`;
    return this.#word !== undefined && name.startsWith(start) ? name.slice(start.length) : name;
  }

  /** The processor seeing envelopes with the application's topic names. */
  processor(inner: Processor): Processor {
    if (this.#word === undefined) return inner;
    const envelope = (received: Envelope): Envelope => ({
      ...received,
      topic: this.fromBroker(received.topic),
    });
    const batch = inner.processBatch?.bind(inner);
    return {
      process: (received) => inner.process(envelope(received)),
      ...(batch === undefined
        ? {}
        : { processBatch: (received: readonly Envelope[]) => batch(received.map(envelope)) }),
    };
  }

  /** The dead letters, asked and listed by the application's group and topic names. */
  deadLetters(inner: DeadLetters): DeadLetters {
    if (this.#word === undefined) return inner;
    const letter = (stored: DeadLetter): DeadLetter => ({
      ...stored,
      group: this.fromBroker(stored.group),
      topic: this.fromBroker(stored.topic),
    });
    const depth = inner.depth?.bind(inner);
    return {
      list: async (query) => (await inner.list({ ...query, group: this.toBroker(query.group) })).map(letter),
      replay: (group, ids) => inner.replay(this.toBroker(group), ids),
      purge: (group, ids) => inner.purge(this.toBroker(group), ids),
      ...(depth === undefined ? {} : { depth: (group: string) => depth(this.toBroker(group)) }),
    };
  }
}
