import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { UsageError } from './command.js';

/** One node of a cluster as `npm run brokers -- start --cluster` started it (its `cluster.json`). */
export interface ClusterNode {
  /** The node's name in this file (`n1`). */
  readonly id: string;
  /** The name the broker gives the node (a NATS server name, a RabbitMQ node name, a Kafka broker id). */
  readonly name?: string;
  /** Its client URL. */
  readonly url: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string;
  readonly logFile: string;
  readonly pidFile: string;
  /** A word of the node's command line, so that a reused pid is not taken for the node. */
  readonly marker: string;
  /** The node writes its own pid file (RabbitMQ): the pid of the process started is not the node's. */
  readonly writesPid?: boolean;
}

export interface ClusterState {
  readonly broker: string;
  readonly urls: readonly string[];
  readonly nodes: readonly ClusterNode[];
  /** The broker's admin tool and its environment (RabbitMQ's rabbitmqctl, with the cluster's cookie). */
  readonly admin?: { readonly command: string; readonly env: Readonly<Record<string, string>> };
}

/** Where `npm run brokers -- start --cluster <name>` keeps its description (brokers/lib/cluster.js). */
export function defaultClusterFile(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.ONCEMQ_BROKERS_DIR;
  const home =
    configured !== undefined && configured !== ''
      ? configured
      : join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'oncemq', 'brokers');
  return join(home, 'run', `cluster-${name}`, 'cluster.json');
}

/** The cluster a run kills nodes of; a usage error naming the command that starts it when it is not there. */
export function readCluster(file: string, transport: string): ClusterState {
  if (!existsSync(file)) {
    throw new UsageError(
      `no cluster at ${file}: start one with npm run brokers -- start --cluster ${transport}`,
    );
  }
  const state = JSON.parse(readFileSync(file, 'utf8')) as ClusterState;
  if (state.broker !== transport) {
    throw new UsageError(`${file} describes a ${state.broker} cluster, not ${transport}`);
  }
  return state;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The node's pid while it runs (the pid file names a live process whose command line has its marker). */
export function nodePid(node: ClusterNode): number | undefined {
  if (!existsSync(node.pidFile)) return undefined;
  const pid = Number(readFileSync(node.pidFile, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').includes(node.marker)
      ? pid
      : undefined;
  } catch {
    return pid;
  }
}

function portAccepts(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const done = (open: boolean): void => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * The nodes of a running cluster, as a chaos run acts on them: `kill -9`, started again the way
 * `npm run brokers` started them (same command, configuration and data), paused and resumed.
 */
export class ClusterNodes {
  readonly state: ClusterState;

  constructor(state: ClusterState) {
    this.state = state;
  }

  node(id: string): ClusterNode {
    const node = this.state.nodes.find((candidate) => candidate.id === id || candidate.name === id);
    if (node === undefined) throw new Error(`no node ${id} in the cluster`);
    return node;
  }

  /** SIGKILL: no goodbye to its peers or clients; its data stays. */
  kill(node: ClusterNode): boolean {
    const pid = nodePid(node);
    if (pid === undefined) return false;
    process.kill(pid, 'SIGKILL');
    return true;
  }

  pause(node: ClusterNode): boolean {
    const pid = nodePid(node);
    if (pid === undefined) return false;
    process.kill(pid, 'SIGSTOP');
    return true;
  }

  resume(node: ClusterNode): void {
    const pid = nodePid(node);
    if (pid !== undefined) process.kill(pid, 'SIGCONT');
  }

  /** Starts the node again as it was started, and waits until its client port accepts connections. */
  async restart(node: ClusterNode, timeoutMs = 120_000): Promise<void> {
    for (let waited = 0; nodePid(node) !== undefined && waited < 10_000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const log = openSync(node.logFile, 'a');
    try {
      const child = spawn(node.command, [...node.args], {
        cwd: node.cwd,
        env: { ...process.env, ...node.env },
        detached: true,
        stdio: ['ignore', log, log],
      });
      if (child.pid === undefined) throw new Error(`${node.id} did not start again`);
      if (node.writesPid !== true) writeFileSync(node.pidFile, `${child.pid}\n`);
      child.unref();
    } finally {
      closeSync(log);
    }
    const deadline = Date.now() + timeoutMs;
    while (!(await portAccepts(node.url))) {
      if (Date.now() > deadline) throw new Error(`${node.id} did not come back within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}
