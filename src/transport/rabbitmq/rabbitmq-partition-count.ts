import { errorText } from '../../core/errors.js';
import type { PartitionCountStore } from '../ordered/partition-count.js';
import type { RabbitChannel } from './rabbitmq-channel.js';
import { PRECONDITION_FAILED, replyCode, type RabbitTopology } from './rabbitmq-topology.js';

/**
 * An ordered group's partition count, kept as the `x-max-length` of its marker queue. RabbitMQ
 * compares a queue's arguments on every later declare, so declaring the marker with a count either
 * records it (no marker yet), matches, or is refused naming the recorded count: the record cannot
 * change under a member without the marker being deleted first (a drain does that).
 */
export class RabbitPartitionCountStore implements PartitionCountStore {
  readonly where: string;
  readonly #topology: RabbitTopology;
  readonly #marker: string;
  readonly #count: number;

  /** The store of `group`, read by a member configured with `count` partitions. */
  constructor(topology: RabbitTopology, group: string, count: number) {
    this.#topology = topology;
    this.#marker = topology.names.partitionMarker(group);
    this.#count = count;
    this.where = `queue '${this.#marker}'`;
  }

  /** The marker's count, or null when there is no marker; read by declaring it with this member's count. */
  async read(): Promise<number | null> {
    if (!(await this.#topology.exists(this.#marker))) return null;
    return this.recordFirst(this.#count);
  }

  /** Declares the marker with `count` and answers the count it holds afterwards. */
  recordFirst(count: number): Promise<number> {
    this.#topology.declared.queues.add(this.#marker);
    return this.#topology.probe((ch) => this.#declare(ch, count));
  }

  async #declare(ch: RabbitChannel, count: number): Promise<number> {
    try {
      await ch.raw.assertQueue(this.#marker, { durable: true, arguments: { 'x-max-length': count } });
      return count;
    } catch (error) {
      const recorded = /current (?:value )?is '(\d+)'/.exec(errorText(error))?.[1];
      if (replyCode(error) !== PRECONDITION_FAILED || recorded === undefined) throw error;
      return Number(recorded);
    }
  }
}
