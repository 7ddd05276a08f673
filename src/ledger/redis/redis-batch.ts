import { LedgerUnavailableError } from '../../core/errors.js';

/** Most keys in one batched script call: long enough to pay off, short enough not to stall Redis. */
export const REDIS_MAX_BATCH = 128;

/** Batching as configured (`batch`, default on), never on a Redis Cluster client; see {@link RedisBatcher}. */
export function batchingOptions(
  batch: boolean | undefined,
  redis: { readonly cluster?: boolean },
): { readonly enabled: boolean; readonly maxBatch: number } {
  return { enabled: (batch ?? true) && redis.cluster !== true, maxBatch: REDIS_MAX_BATCH };
}

/**
 * Gathers the calls made in one turn of the event loop and sends them to Redis together.
 *
 * Under concurrency, the claims (or completions) of many deliveries become ready in the same turn:
 * one reply from Redis resolves a whole pipelined burst. Sending them as one multi-key script call
 * instead of one command each saves the client's per-command work (encoding, its queue entry and
 * timeout, the reply promise) and Redis's per-command dispatch, which is most of the cost of a short
 * command. A turn with a single call sends it alone through `single`, so one delivery at a time
 * pays nothing but a `process.nextTick`.
 *
 * Every key keeps its own atomic step inside the script; a batch only shares the round trip. A
 * script touches several keys, so on Redis Cluster (different slots) batching is off: cluster clients
 * are detected up front, and a `CROSSSLOT` refusal switches batching off for good and reruns the
 * batch one call at a time.
 */
export class RedisBatcher<I, R> {
  #queue: Entry<I, R>[] = [];
  #scheduled = false;
  #enabled: boolean;

  constructor(
    private readonly single: (item: I) => Promise<R>,
    /** One answer per item, in order; an `Error` answer fails that item alone. */
    private readonly many: (items: readonly I[]) => Promise<readonly (R | Error)[]>,
    private readonly options: { readonly enabled: boolean; readonly maxBatch: number },
  ) {
    this.#enabled = options.enabled;
  }

  /** False once Redis refused a multi-key call (`CROSSSLOT`), or when configured off. */
  get enabled(): boolean {
    return this.#enabled;
  }

  run(item: I): Promise<R> {
    if (!this.#enabled) return this.single(item);
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        process.nextTick(this.#flush);
      }
    });
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    const max = this.options.maxBatch;
    if (queue.length <= max) this.#send(queue);
    else for (let i = 0; i < queue.length; i += max) this.#send(queue.slice(i, i + max));
  };

  #send(entries: readonly Entry<I, R>[]): void {
    const first = entries[0];
    if (entries.length === 1 && first !== undefined) {
      this.single(first.item).then(first.resolve, first.reject);
      return;
    }
    this.many(entries.map((entry) => entry.item)).then(
      (answers) => {
        entries.forEach((entry, i) => {
          const answer = answers[i];
          if (answer instanceof Error) entry.reject(answer);
          else if (answer === undefined && i >= answers.length)
            entry.reject(new Error(`Redis answered ${answers.length} of ${entries.length} batched calls`));
          else entry.resolve(answer as R);
        });
      },
      (error: unknown) => {
        if (isCrossSlot(error)) {
          this.#enabled = false;
          for (const entry of entries) this.single(entry.item).then(entry.resolve, entry.reject);
          return;
        }
        for (const entry of entries) entry.reject(error);
      },
    );
  }
}

interface Entry<I, R> {
  readonly item: I;
  readonly resolve: (value: R) => void;
  readonly reject: (error: unknown) => void;
}

function isCrossSlot(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (e.message.includes('CROSSSLOT')) return true;
  }
  return false;
}

/**
 * Splits a multi-key script's reply into one answer per key: `read(answer)` for a plain answer, a
 * {@link LedgerUnavailableError} for a key whose step failed (`{ error }`) or a reply of the wrong shape.
 */
export function perKey<T>(
  reply: unknown,
  count: number,
  what: string,
  read: (answer: unknown) => T,
): (T | Error)[] {
  if (!Array.isArray(reply) || reply.length !== count) {
    const error = new LedgerUnavailableError(`Redis ledger failed ${what}: expected ${count} answers`);
    return Array.from({ length: count }, () => error);
  }
  return reply.map((answer: unknown) =>
    Array.isArray(answer)
      ? new LedgerUnavailableError(`Redis ledger failed ${what}: ${String(answer[0])}`)
      : read(answer),
  );
}
