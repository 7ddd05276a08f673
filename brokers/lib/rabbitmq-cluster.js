// Three RabbitMQ nodes of the machine's rabbitmq-server in one cluster: oncemq-c1..c3@localhost, AMQP on
// 127.0.0.1:5701-5703, distribution on 25701-25703, each with its own data, logs, configuration and an
// Erlang cookie of their own (HOME is the cluster's run directory). The machine's own node
// (rabbit@localhost, :5672) is not touched: nothing here reads /etc/rabbitmq.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import process from 'node:process';
import { BrokersError, lastLines, portOpen } from './java-process.js';

const HOST = '127.0.0.1';
const NODES = [1, 2, 3];
const amqpPort = (n) => 5700 + n;
const distPort = (n) => 25700 + n;
const nodeName = (n) => `oncemq-c${n}@localhost`;

/** The rabbitmq-server scripts to run: `$ONCEMQ_RABBITMQ_SBIN`, else the Debian package's. */
function sbin() {
  const configured = process.env.ONCEMQ_RABBITMQ_SBIN;
  const dir = configured !== undefined && configured !== '' ? configured : '/usr/lib/rabbitmq/bin';
  if (!existsSync(join(dir, 'rabbitmq-server'))) {
    throw new BrokersError(`no rabbitmq-server in ${dir}; install RabbitMQ or set ONCEMQ_RABBITMQ_SBIN`);
  }
  return dir;
}

/** The environment of every node and of rabbitmqctl against them: the cluster's own cookie and files. */
function sharedEnv(run) {
  return {
    HOME: run,
    RABBITMQ_CONF_ENV_FILE: join(run, 'rabbitmq-env.conf'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(run, 'enabled_plugins'),
  };
}

/** Runs rabbitmqctl against one node; its output, or a failure with what it said. */
export function rabbitmqctl(run, node, args, timeoutMs = 60_000) {
  const result = spawnSync(join(sbin(), 'rabbitmqctl'), ['-n', node, ...args], {
    env: { ...process.env, ...sharedEnv(run) },
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  if (result.status !== 0) {
    throw new BrokersError(
      `rabbitmqctl -n ${node} ${args.join(' ')} exited with ${result.status}:\n${lastLines(`${result.stdout}${result.stderr}`)}`,
    );
  }
  return result.stdout;
}

export const rabbitmqCluster = {
  name: 'rabbitmq',

  describe(run) {
    const command = join(sbin(), 'rabbitmq-server');
    const nodes = NODES.map((n) => {
      const dir = join(run, `c${n}`);
      return {
        id: `c${n}`,
        name: nodeName(n),
        url: `amqp://guest:guest@${HOST}:${amqpPort(n)}`,
        command,
        args: [],
        env: {
          ...sharedEnv(run),
          RABBITMQ_NODENAME: nodeName(n),
          RABBITMQ_NODE_IP_ADDRESS: HOST,
          RABBITMQ_NODE_PORT: String(amqpPort(n)),
          RABBITMQ_DIST_PORT: String(distPort(n)),
          RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
          RABBITMQ_LOG_BASE: join(dir, 'log'),
          RABBITMQ_PID_FILE: join(dir, 'rabbitmq.pid'),
          RABBITMQ_CONFIG_FILE: join(run, 'rabbitmq.conf'),
        },
        cwd: dir,
        // the node writes its own pid file: the process started is a shell that runs the Erlang VM
        writesPid: true,
        // the Erlang VM's command line names its home (the run directory), not the node
        marker: run,
        logFile: join(dir, 'rabbitmq-server.log'),
        pidFile: join(dir, 'rabbitmq.pid'),
      };
    });
    return {
      broker: 'rabbitmq',
      urls: nodes.map((node) => node.url),
      ports: NODES.flatMap((n) => [amqpPort(n), distPort(n)]),
      admin: { command: join(sbin(), 'rabbitmqctl'), env: sharedEnv(run) },
      nodes,
    };
  },

  prepare(state) {
    const run = state.admin.env.HOME;
    writeFileSync(join(run, '.erlang.cookie'), randomBytes(20).toString('hex').toUpperCase(), {
      mode: 0o400,
    });
    writeFileSync(
      join(run, 'rabbitmq-env.conf'),
      `ERL_EPMD_ADDRESS=${HOST}\nexport ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}"\n`,
    );
    writeFileSync(join(run, 'enabled_plugins'), '[].\n');
    writeFileSync(
      join(run, 'rabbitmq.conf'),
      [
        // a node paused past this is taken for gone by its peers (60 s by default)
        'net_ticktime = 10',
        // RabbitMQ's advice for three nodes or more: a node that finds itself in the minority of a
        // partition stops its listeners until it sees the majority again, then rejoins on its own
        // (the default, ignore, leaves both sides running and the partition reported until a restart)
        'cluster_partition_handling = pause_minority',
        'log.console = true',
        'log.file = false',
        '',
      ].join('\n'),
    );
    for (const node of state.nodes) mkdirSync(node.cwd, { recursive: true });
  },

  /** Every node's AMQP port open; once joined, every node running in one cluster. */
  async ready(state) {
    for (const n of NODES) if (!(await portOpen(amqpPort(n)))) return false;
    if (!state.joined) return true;
    const status = JSON.parse(
      rabbitmqctl(state.admin.env.HOME, nodeName(1), ['cluster_status', '--formatter', 'json']),
    );
    return NODES.every((n) => status.running_nodes.includes(nodeName(n)));
  },

  /** Joins the second and third node to the first (`join_cluster`), then waits for all three running. */
  async afterStart(state) {
    const run = state.admin.env.HOME;
    for (const n of NODES.slice(1)) {
      rabbitmqctl(run, nodeName(n), ['stop_app']);
      rabbitmqctl(run, nodeName(n), ['join_cluster', nodeName(1)]);
      rabbitmqctl(run, nodeName(n), ['start_app']);
    }
    state.joined = true;
    writeFileSync(join(run, 'cluster.json'), `${JSON.stringify(state, null, 2)}\n`);
    if (!(await this.ready(state))) throw new BrokersError('the RabbitMQ nodes did not form one cluster');
  },
};
