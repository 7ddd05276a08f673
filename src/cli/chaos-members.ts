import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The CLI entry the member processes run (`oncemq chaos-member`). */
const CLI = fileURLToPath(new URL('./oncemq.js', import.meta.url));

/** How long a member may take to subscribe before the run gives up on it. */
const READY_TIMEOUT_MS = 60_000;
/**
 * Starts of one member before the run gives up: a start can fail for the run's own faults (its
 * database connections killed while it opens its store).
 */
const START_ATTEMPTS = 5;
/** How long a member may take to drain on SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 15_000;

interface Member {
  readonly name: string;
  child: ChildProcess;
  exited: Promise<number | null>;
}

/**
 * The consumer processes of a chaos run, one `oncemq chaos-member` each: started, killed with
 * SIGKILL and started again under the same name, stopped with SIGTERM at the end.
 */
export class ChaosMembers {
  readonly #args: readonly string[];
  readonly #place: (index: number) => Promise<readonly string[]>;
  readonly #members: Member[] = [];
  /** Members killed and not yet subscribed again. */
  readonly #restarting = new Set<Member>();
  /** Lines the members wrote to stderr, last ones kept (shown when the run fails). */
  readonly stderr: string[] = [];
  /** Processes killed so far. */
  kills = 0;

  /**
   * `args`: the `chaos-member` options every member gets. `place`: the command that runs member
   * `index` (the `index` of `member-<index>`) somewhere else, such as one of the run's test hosts,
   * once that place can start it (a host cut off the network cannot).
   */
  constructor(
    args: readonly string[],
    place: (index: number) => Promise<readonly string[]> = () => Promise.resolve([]),
  ) {
    this.#args = args;
    this.#place = place;
  }

  /** Starts `count` members and waits until each has subscribed. */
  async start(count: number): Promise<void> {
    const names = Array.from({ length: count }, (_, index) => `member-${index}`);
    this.#members.push(...(await Promise.all(names.map((name) => this.#startMember(name)))));
  }

  /** Starts a member and waits until it subscribed, starting it again when a start fails. */
  async #startMember(name: string): Promise<Member> {
    for (let attempt = 1; ; attempt++) {
      const { member, ready } = this.#spawn(
        name,
        await this.#place(Number(name.slice(name.lastIndexOf('-') + 1))),
      );
      try {
        await ready;
        return member;
      } catch (error) {
        member.child.kill('SIGKILL');
        await member.exited;
        if (attempt >= START_ATTEMPTS) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  get size(): number {
    return this.#members.length;
  }

  #spawn(name: string, prefix: readonly string[]): { member: Member; ready: Promise<void> } {
    const [command, ...before] = [...prefix, process.execPath];
    const child = spawn(command, [...before, CLI, 'chaos-member', ...this.#args, '--name', name], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    child.stderr.on('data', (chunk: Buffer) => {
      this.stderr.push(...chunk.toString().split('\n').filter(Boolean));
      this.stderr.splice(0, Math.max(0, this.stderr.length - 50));
    });
    const ready = new Promise<void>((resolve, reject) => {
      let buffer = '';
      const timer = setTimeout(() => {
        reject(
          new Error(
            `chaos member ${name} did not subscribe within ${READY_TIMEOUT_MS / 1000} s:\n${this.stderr.slice(-15).join('\n')}`,
          ),
        );
      }, READY_TIMEOUT_MS);
      child.stdout.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        if (buffer.includes('"ready":true')) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then((code) => {
        clearTimeout(timer);
        reject(
          new Error(
            `chaos member ${name} exited with ${code} before subscribing:\n${this.stderr.slice(-15).join('\n')}`,
          ),
        );
      });
    });
    ready.catch(() => undefined);
    return { member: { name, child, exited }, ready };
  }

  /**
   * Kills the `index`-th member that is up (not being restarted) with SIGKILL (no drain, no ack, no
   * goodbye to the broker) and starts it again after `restartAfterMs`, under the same name; resolves
   * once the new process subscribed. A member being restarted is never picked: two restarts of one
   * member would each start a process, and the one the harness lost track of would run on after
   * the run (keeping the harness alive) as a second consumer under the same name.
   */
  async killAndRestart(index: number, restartAfterMs: number): Promise<void> {
    const up = this.#members.filter((candidate) => !this.#restarting.has(candidate));
    const member = up[index % Math.max(1, up.length)];
    if (member === undefined) return;
    this.#restarting.add(member);
    try {
      member.child.kill('SIGKILL');
      this.kills++;
      await member.exited;
      await new Promise((resolve) => setTimeout(resolve, restartAfterMs));
      const next = await this.#startMember(member.name);
      member.child = next.child;
      member.exited = next.exited;
    } finally {
      this.#restarting.delete(member);
    }
  }

  /** SIGTERM to every member (each drains and leaves), SIGKILL to any still running after a while. */
  async stop(): Promise<void> {
    await Promise.all(
      this.#members.map(async (member) => {
        if (member.child.exitCode !== null || member.child.signalCode !== null) return;
        member.child.kill('SIGTERM');
        const timer = setTimeout(() => member.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
        await member.exited;
        clearTimeout(timer);
      }),
    );
  }
}
