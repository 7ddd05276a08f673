// Three nats-server nodes with JetStream in one cluster: clients on 127.0.0.1:4301-4303, routes on
// 6301-6303, monitoring on 8301-8303; the machine's own nats-server (4222) is not touched.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { BrokersError } from './java-process.js';

const HOST = '127.0.0.1';
const NODES = [1, 2, 3];
const clientPort = (n) => 4300 + n;
const routePort = (n) => 6300 + n;
const monitorPort = (n) => 8300 + n;

/** The nats-server to run: `$ONCEMQ_NATS_SERVER`, else the machine's. */
function natsServer() {
  const configured = process.env.ONCEMQ_NATS_SERVER;
  if (configured !== undefined && configured !== '') return configured;
  for (const candidate of ['/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server']) {
    if (spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  if (spawnSync('nats-server', ['--version']).status === 0) return 'nats-server';
  throw new BrokersError('no nats-server found; install it or set ONCEMQ_NATS_SERVER to its path');
}

function configuration(n, run) {
  const routes = NODES.filter((other) => other !== n)
    .map((other) => `nats-route://${HOST}:${routePort(other)}`)
    .join(', ');
  return [
    `server_name: n${n}`,
    `listen: ${HOST}:${clientPort(n)}`,
    `http: ${HOST}:${monitorPort(n)}`,
    'jetstream {',
    `  store_dir: "${join(run, `n${n}`, 'jetstream')}"`,
    '  max_memory_store: 64MB',
    '  max_file_store: 2GB',
    '}',
    'cluster {',
    '  name: oncemq',
    `  listen: ${HOST}:${routePort(n)}`,
    `  routes: [${routes}]`,
    '}',
    '',
  ].join('\n');
}

async function healthy(n) {
  const response = await globalThis.fetch(`http://${HOST}:${monitorPort(n)}/healthz`, {
    signal: globalThis.AbortSignal.timeout(2000),
  });
  await response.arrayBuffer();
  return response.status === 200;
}

async function metaLeader(n) {
  const response = await globalThis.fetch(`http://${HOST}:${monitorPort(n)}/jsz`, {
    signal: globalThis.AbortSignal.timeout(2000),
  });
  const jsz = await response.json();
  return jsz.meta_cluster?.leader;
}

export const natsCluster = {
  name: 'nats',

  describe(run) {
    const command = natsServer();
    const nodes = NODES.map((n) => {
      const dir = join(run, `n${n}`);
      const config = join(dir, 'nats.conf');
      return {
        id: `n${n}`,
        url: `nats://${HOST}:${clientPort(n)}`,
        monitor: `http://${HOST}:${monitorPort(n)}`,
        command,
        args: ['-c', config],
        env: {},
        cwd: dir,
        config,
        marker: config,
        logFile: join(dir, 'nats.log'),
        pidFile: join(dir, 'nats.pid'),
      };
    });
    return {
      broker: 'nats',
      urls: nodes.map((node) => node.url),
      ports: NODES.flatMap((n) => [clientPort(n), routePort(n), monitorPort(n)]),
      nodes,
    };
  },

  prepare(state) {
    for (const [index, node] of state.nodes.entries()) {
      mkdirSync(node.cwd, { recursive: true });
      writeFileSync(node.config, configuration(NODES[index], join(node.cwd, '..')));
    }
  },

  /** Every node healthy (JetStream current) and one meta leader they all agree on. */
  async ready() {
    for (const n of NODES) if (!(await healthy(n))) return false;
    const leaders = new Set();
    for (const n of NODES) leaders.add(await metaLeader(n));
    const [leader] = leaders;
    return leaders.size === 1 && typeof leader === 'string' && leader !== '';
  },
};
