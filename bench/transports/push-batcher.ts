/**
 * The hand-written part of a raw consumer on a broker that pushes (RabbitMQ with a prefetch, a
 * JetStream consumer with max ack pending): messages that arrive together (in one turn of the event
 * loop) are handed to `work` in batches of up to `batchSize`; each is acked after its batch's work
 * resolved. The broker bounds the messages unacked at once.
 */
import type { RawMessage } from '../points-db.js';
import type { RawConsumeOptions } from '../transport-target.js';

export interface PushHandlers<M> {
  readonly work: (messages: readonly RawMessage[]) => Promise<void>;
  readonly toRaw: (message: M) => RawMessage;
  readonly ack: (message: M) => void;
  readonly acked: (count: number) => void;
  readonly failed: (error: unknown) => void;
}

export class PushBatcher<M> {
  readonly #options: RawConsumeOptions;
  readonly #handlers: PushHandlers<M>;
  readonly #running = new Set<Promise<void>>();
  #waiting: M[] = [];
  #scheduled = false;

  constructor(options: RawConsumeOptions, handlers: PushHandlers<M>) {
    this.#options = options;
    this.#handlers = handlers;
  }

  push(message: M): void {
    if (this.#options.batchSize <= 1) {
      this.#run([message]);
      return;
    }
    this.#waiting.push(message);
    if (this.#waiting.length >= this.#options.batchSize) this.#flush();
    else if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  #flush(): void {
    this.#scheduled = false;
    while (this.#waiting.length > 0) this.#run(this.#waiting.splice(0, this.#options.batchSize));
  }

  #run(batch: readonly M[]): void {
    const { work, toRaw, ack, acked, failed } = this.#handlers;
    const task = work(batch.map(toRaw)).then(
      () => {
        for (const message of batch) ack(message);
        acked(batch.length);
      },
      (error: unknown) => failed(error),
    );
    this.#running.add(task);
    void task.finally(() => this.#running.delete(task));
  }

  /** Waits for the batches in progress (and those waiting) to be done. */
  async idle(): Promise<void> {
    this.#flush();
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }
}
