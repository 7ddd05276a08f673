import type { ClusterNode, ClusterNodes } from './cluster-nodes.js';
import { seededRandom } from './seeded-random.js';

export interface NodeFaultsConfig {
  readonly nodes: ClusterNodes;
  /**
   * The node that leads the run's stream, quorum queue or partition now, by the broker's name for it;
   * undefined when the broker does not tell (an election under way).
   */
  readonly leader: () => Promise<string | undefined>;
  readonly seed: string;
  /** A node failure every this long, kills and pauses in turn (a kill first). */
  readonly everyMs: number;
  /** How long a killed node stays down before it is started again. */
  readonly downMs: number;
  /** How long a paused node stays paused (past the cluster's timeouts: its peers count it gone). */
  readonly pauseMs: number;
}

/** One node failure of a run, for its report. */
export interface NodeFault {
  readonly kind: 'kill' | 'pause';
  readonly node: string;
  /** Whether the node was the leader the broker named (else a node drawn at random). */
  readonly leader: boolean;
  /** Milliseconds from the start of the faults. */
  readonly atMs: number;
  /** How long until the node was back (restarted and accepting connections, or resumed). */
  readonly backAfterMs: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The node failures of a chaos run on a cluster: every `everyMs`, the leader of the run's stream /
 * quorum queue / partition is killed with SIGKILL and started again after `downMs`, or paused with
 * SIGSTOP for `pauseMs` and resumed with SIGCONT — one failure at a time, never two nodes down at
 * once (a 3-node cluster keeps its quorum). `stop()` brings back whatever is down before it returns.
 */
export class NodeFaults {
  readonly #config: NodeFaultsConfig;
  readonly #random: () => number;
  readonly faults: NodeFault[] = [];
  #running = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #failure: Error | undefined;
  #started = 0;

  constructor(config: NodeFaultsConfig) {
    this.#config = config;
    this.#random = seededRandom(`${config.seed}\u0000nodes`);
  }

  get kills(): number {
    return this.faults.filter((fault) => fault.kind === 'kill').length;
  }

  get pauses(): number {
    return this.faults.filter((fault) => fault.kind === 'pause').length;
  }

  start(): void {
    if (this.#running || this.#config.everyMs <= 0) return;
    this.#running = true;
    this.#started = performance.now();
    this.#loop = this.#run().catch((error: unknown) => {
      this.#failure = error instanceof Error ? error : new Error(String(error));
    });
  }

  async #run(): Promise<void> {
    for (let index = 0; this.#running; index++) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#config.everyMs);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (this.#stopped()) return;
      await this.#fail(index % 2 === 0 ? 'kill' : 'pause');
    }
  }

  /** Whether `stop()` was called (while the loop waited). */
  #stopped(): boolean {
    return !this.#running;
  }

  /** The leader, or a node drawn at random when the broker names none that the cluster has. */
  async #target(): Promise<{ node: ClusterNode; leader: boolean }> {
    const name = await this.#config.leader().catch(() => undefined);
    if (name !== undefined) {
      try {
        return { node: this.#config.nodes.node(name), leader: true };
      } catch {
        // a name the cluster file does not know: fall through
      }
    }
    const all = this.#config.nodes.state.nodes;
    const node = all[Math.floor(this.#random() * all.length)] ?? all[0];
    if (node === undefined) throw new Error('the cluster has no node');
    return { node, leader: false };
  }

  async #fail(kind: 'kill' | 'pause'): Promise<void> {
    const { node, leader } = await this.#target();
    const nodes = this.#config.nodes;
    const at = performance.now();
    if (kind === 'kill') {
      if (!nodes.kill(node)) return;
      await sleep(this.#config.downMs);
      await nodes.restart(node);
    } else {
      if (!nodes.pause(node)) return;
      try {
        await sleep(this.#config.pauseMs);
      } finally {
        nodes.resume(node);
      }
    }
    this.faults.push({
      kind,
      node: node.id,
      leader,
      atMs: Math.round(at - this.#started),
      backAfterMs: Math.round(performance.now() - at),
    });
  }

  /** The next failure now rather than at its time, unless one is under way (a chaos run's rounds). */
  trigger(): void {
    this.#wake?.();
  }

  /** Ends the schedule once the failure under way is over (its node back); throws if one went wrong. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#wake?.();
    await this.#loop;
    if (this.#failure !== undefined) throw this.#failure;
  }
}
