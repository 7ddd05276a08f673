// Three-node clusters of NATS, RabbitMQ and Kafka on loopback, for `oncemq chaos --cluster`: each node is
// a process of its own, started detached, with its own ports and data; `cluster.json` in the cluster's run
// directory says how each node was started, so the chaos harness can kill one and start it again the
// same way. See docs/brokers.md, "Clusters".
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { brokersHome } from './layout.js';
import { BrokersError, logTail, portOpen, stopProcess, withLock } from './java-process.js';

/** The run directory of a cluster: `<brokers home>/run/cluster-<name>` (also read by `oncemq chaos`). */
export function clusterRun(name) {
  return join(brokersHome(), 'run', `cluster-${name}`);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pid in a node's pid file while that process runs and is the node (its command line names its marker). */
export function nodePid(node) {
  if (!existsSync(node.pidFile)) return undefined;
  const pid = Number(readFileSync(node.pidFile, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  try {
    const line = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
    return line.includes(node.marker) ? pid : undefined;
  } catch {
    return pid;
  }
}

/**
 * Starts one node as its description says (detached; output appended to its log). Nodes that write
 * their own pid file (`node.writesPid`) are left to do so; for the others the child's pid is written.
 */
export function startNode(node) {
  mkdirSync(node.cwd, { recursive: true });
  const log = openSync(node.logFile, 'a');
  try {
    const child = spawn(node.command, node.args, {
      cwd: node.cwd,
      env: { ...process.env, ...node.env },
      detached: true,
      stdio: ['ignore', log, log],
    });
    if (child.pid === undefined)
      throw new BrokersError(`${node.command} did not start (see ${node.logFile})`);
    if (!node.writesPid) writeFileSync(node.pidFile, `${child.pid}\n`);
    child.unref();
    return child.pid;
  } finally {
    closeSync(log);
  }
}

function readState(run) {
  const file = join(run, 'cluster.json');
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : undefined;
}

/** Stops every node of a cluster (SIGCONT first: a node the chaos harness paused), removes its data. */
async function stopNodes(run, say) {
  const state = readState(run);
  let any = false;
  for (const node of state?.nodes ?? []) {
    const pid = nodePid(node);
    if (pid === undefined) continue;
    any = true;
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone meanwhile
    }
    say(`cluster ${state.broker}: ${node.id} (pid ${pid}) ${await stopProcess(pid, 30_000)}`);
  }
  rmSync(run, { recursive: true, force: true });
  return any;
}

/**
 * Starts the three nodes of `cluster` (from `brokers/lib/<name>-cluster.js`) and waits until the cluster
 * serves: `cluster.nodes(run)` describes the nodes, `cluster.ready(state)` says when they form one
 * cluster, `cluster.afterStart(state)` (optional) joins them. Already running and ready: nothing to do.
 */
export async function startCluster(cluster, say) {
  const run = clusterRun(cluster.name);
  mkdirSync(run, { recursive: true });
  const lock = join(run, '..', `cluster-${cluster.name}.lock`);
  await withLock(lock, async () => {
    const existing = readState(run);
    if (existing !== undefined && existing.nodes.every((node) => nodePid(node) !== undefined)) {
      if (await cluster.ready(existing).catch(() => false)) {
        say(`cluster ${cluster.name} already runs on ${existing.urls.join(', ')}`);
        return;
      }
    }
    if (await stopNodes(run, say)) say(`cluster ${cluster.name}: stopped what was left of an earlier start`);
    mkdirSync(run, { recursive: true });
    const state = cluster.describe(run);
    for (const port of state.ports) {
      if (await portOpen(port)) {
        throw new BrokersError(
          `port ${port} is taken by a process this command did not start; cluster ${cluster.name} needs ${state.ports.join(', ')}`,
        );
      }
    }
    const began = Date.now();
    try {
      await cluster.prepare?.(state);
      for (const node of state.nodes) startNode(node);
      writeFileSync(join(run, 'cluster.json'), `${JSON.stringify(state, null, 2)}\n`);
      await waitForCluster(cluster, state);
      await cluster.afterStart?.(state);
    } catch (error) {
      await stopNodes(run, say);
      throw error;
    }
    say(
      `cluster ${cluster.name} (${state.nodes.length} nodes) ready on ${state.urls.join(', ')} in ${((Date.now() - began) / 1000).toFixed(1)} s`,
    );
  });
}

async function waitForCluster(cluster, state, timeoutMs = 240_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    for (const node of state.nodes) {
      if (!node.writesPid && nodePid(node) === undefined) {
        throw new BrokersError(`${node.id} exited during start-up:\n${logTail(node.logFile)}`);
      }
    }
    try {
      if (await cluster.ready(state)) return;
    } catch (error) {
      last = error;
    }
    await sleep(500);
  }
  const tails = state.nodes.map((node) => `--- ${node.logFile}:\n${logTail(node.logFile, 15)}`).join('\n');
  throw new BrokersError(
    `cluster ${cluster.name} was not ready after ${timeoutMs / 1000} s${last ? ` (${last.message})` : ''}\n${tails}`,
  );
}

export async function stopCluster(cluster, say) {
  const run = clusterRun(cluster.name);
  if (!existsSync(run)) {
    say(`cluster ${cluster.name} was not running`);
    return;
  }
  await withLock(join(run, '..', `cluster-${cluster.name}.lock`), async () => {
    if (!(await stopNodes(run, say))) say(`cluster ${cluster.name} was not running`);
  });
}

/** What runs of a cluster: its nodes' pids and resident memory. */
export function clusterStatus(cluster) {
  const state = readState(clusterRun(cluster.name));
  const nodes = (state?.nodes ?? []).map((node) => {
    const pid = nodePid(node);
    let rssMiB = null;
    if (pid !== undefined) {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const match = /VmRSS:\s+(\d+) kB/.exec(status);
      rssMiB = match === null ? null : Math.round(Number(match[1]) / 1024);
    }
    return { id: node.id, url: node.url, pid: pid ?? null, rssMiB };
  });
  return {
    name: cluster.name,
    running: nodes.length > 0 && nodes.every((node) => node.pid !== null),
    urls: state?.urls ?? [],
    nodes,
  };
}
