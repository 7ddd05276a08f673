import type { BrokerRoute } from './broker-route.js';
import type { ChaosMembers } from './chaos-members.js';
import { ConnectionCuts } from './connection-cuts.js';
import type { DemoStore } from './demo-store.js';
import { seededRandom } from './seeded-random.js';

export interface ChaosScheduleConfig {
  readonly members: ChaosMembers;
  readonly route: BrokerRoute;
  readonly store: Pick<DemoStore, 'killConnections'>;
  readonly seed: string;
  readonly killEveryMs: number;
  readonly dropEveryMs: number;
  readonly poolEveryMs: number;
}

/** How long a killed member stays down before it is started again. */
const RESTART_AFTER_MS = 300;

/**
 * The faults of a chaos run: a member killed with SIGKILL (and restarted), the broker connections
 * cut through the proxy, the run's database connections killed — each on its own timer while
 * events flow, and all three at once in each {@link round} the harness asks for.
 */
export class ChaosSchedule {
  readonly #config: ChaosScheduleConfig;
  readonly #random: () => number;
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #restarts = new Set<Promise<void>>();
  readonly #cuts: ConnectionCuts;
  /** Times the run's database connections were killed (with at least one killed). */
  poolRestarts = 0;
  /** A restart that failed (a member that could not subscribe again), reported at the end. */
  #failure: Error | undefined;

  constructor(config: ChaosScheduleConfig) {
    this.#config = config;
    this.#random = seededRandom(config.seed);
    this.#cuts = new ConnectionCuts(config.route, config.seed, config.dropEveryMs);
  }

  /** Times the broker connections were cut (with at least one open). */
  get connectionDrops(): number {
    return this.#cuts.drops;
  }

  start(): void {
    const every = (ms: number, action: () => unknown): void => {
      if (ms > 0) this.#timers.push(setInterval(action, ms));
    };
    every(this.#config.killEveryMs, () => this.kill());
    if (this.#config.dropEveryMs > 0) this.#cuts.start(); // at gaps around the period (ConnectionCuts)
    every(this.#config.poolEveryMs, () => this.killDatabaseConnections());
  }

  /** Kills a random member that is up; it comes back after a moment. */
  kill(): void {
    if (this.#restarts.size >= this.#config.members.size - 1) return; // keep one member up
    const index = Math.floor(this.#random() * this.#config.members.size);
    const restart = this.#config.members.killAndRestart(index, RESTART_AFTER_MS).catch((error: unknown) => {
      this.#failure ??= error instanceof Error ? error : new Error(String(error));
    });
    const tracked = restart.finally(() => this.#restarts.delete(tracked));
    this.#restarts.add(tracked);
  }

  drop(): void {
    this.#cuts.drop();
  }

  async killDatabaseConnections(): Promise<void> {
    try {
      if (((await this.#config.store.killConnections?.()) ?? 0) > 0) this.poolRestarts++;
    } catch {
      // the server refused this time; the next round tries again
    }
  }

  /** All three faults at once, between two slices of the publishing. */
  async round(): Promise<void> {
    this.kill();
    this.drop();
    await this.killDatabaseConnections();
  }

  /** Stops the timers and waits for members being restarted; throws if one could not come back. */
  async stop(): Promise<void> {
    for (const timer of this.#timers.splice(0)) clearInterval(timer);
    this.#cuts.stop();
    await Promise.all(this.#restarts);
    if (this.#failure !== undefined) throw this.#failure;
  }
}
