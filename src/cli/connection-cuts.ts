import { seededRandom } from './seeded-random.js';

/** What the cuts act on: a run's broker route (`drop` answers how many connections it cut). */
export interface Cuttable {
  drop(): number;
}

/**
 * The gap before the next cut: `everyMs` on average, drawn between half and one and a half times it.
 * A fixed period can lock in step with a broker's own timers: on RocketMQ a message that a receive cut
 * at the proxy takes is handed back for 1 s and revived by a scan every 500 ms, so with a cut every
 * 1.5 s it comes back just after each cut, is taken again for a receive the cut left behind, and never
 * reaches a consumer while the cuts go on (docs/transports/rocketmq.md, "Receives taken at every cut").
 */
export function cutGaps(seed: string, everyMs: number): () => number {
  const random = seededRandom(`${seed}\u0000cuts`);
  return () => Math.round(everyMs * (0.5 + random()));
}

/** Cuts the route's connections every {@link cutGaps} until stopped; counts the cuts that met a connection. */
export class ConnectionCuts {
  readonly #route: Cuttable;
  readonly #gap: () => number;
  #timer: NodeJS.Timeout | undefined;
  /** Times the connections were cut (with at least one open). */
  drops = 0;

  constructor(route: Cuttable, seed: string, everyMs: number) {
    this.#route = route;
    this.#gap = cutGaps(seed, everyMs);
  }

  start(): this {
    this.#next();
    return this;
  }

  /** One cut now, outside the schedule. */
  drop(): void {
    if (this.#route.drop() > 0) this.drops++;
  }

  stop(): void {
    clearTimeout(this.#timer);
  }

  #next(): void {
    this.#timer = setTimeout(() => {
      this.drop();
      this.#next();
    }, this.#gap());
  }
}
