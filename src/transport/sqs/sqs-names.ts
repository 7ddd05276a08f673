import { createHash } from 'node:crypto';
import { ConfigError } from '../../core/errors.js';
import { TransportNamespace } from '../namespace.js';

/** Longest SQS queue name (`.fifo` included). */
const MAX_QUEUE_NAME = 80;

const hash = (...parts: string[]): string =>
  createHash('sha256').update(parts.join('\u0000'), 'utf8').digest('hex').slice(0, 8);

/** A name as a word SQS takes in a queue name: letters, digits, `_`, `-`, cut to `max`. */
const word = (name: string, max: number): string => name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, max);

/**
 * The queue names of one namespace. A topic's log queue is `<ns>_<topic>-<h>`; the queue of group G on
 * it `<ns>_<topic>-<h>-<G>-<h'>` (so the log's name and a dash is the prefix every group queue of the
 * topic starts with, which `ListQueues` finds); a group's dead-letter queue `<ns>_dlq_<G>-<h''>`. Each
 * `h` is 8 hex digits of SHA-256 over the namespace and the full names, so names cut to fit 80
 * characters, or with characters SQS refuses replaced, never meet.
 */
export class SqsNames {
  readonly namespace: string | undefined;
  readonly #prefix: string;
  readonly #fifo: boolean;

  constructor(namespace: string | undefined, fifo: boolean) {
    this.namespace = new TransportNamespace(namespace, '_').name;
    this.#prefix = namespace === undefined ? '' : `${word(namespace, 12)}_`;
    this.#fifo = fifo;
  }

  /** The topic's log queue (always a standard queue). */
  log(topic: string): string {
    return `${this.#prefix}${word(topic, 20)}-${hash(this.namespace ?? '', topic)}`;
  }

  /** What the names of the topic's group queues start with. */
  groupPrefix(topic: string): string {
    return `${this.log(topic)}-`;
  }

  /** The queue of `group` on `topic`. */
  group(topic: string, group: string): string {
    const name = `${this.groupPrefix(topic)}${word(group, 16)}-${hash(group)}${this.#fifo ? '.fifo' : ''}`;
    if (name.length > MAX_QUEUE_NAME) throw new ConfigError('namespace', `queue name ${name} is too long`);
    return name;
  }

  /** The dead-letter queue of `group` (a standard queue). */
  deadLetters(group: string): string {
    return `${this.#prefix}dlq_${word(group, 40)}-${hash(this.namespace ?? '', 'dlq', group)}`;
  }
}
