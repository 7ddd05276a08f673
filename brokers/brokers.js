#!/usr/bin/env node
// npm run brokers -- fetch|start|stop|status [kafka|rocketmq ...] [--json]
// npm run brokers -- rocketmq-topic NAME... [--type NORMAL|FIFO|DELAY|TRANSACTION] [--queues N]
// npm run brokers -- rocketmq-group NAME... [--orderly] [--retries N]
// npm run brokers -- start|stop|status --cluster nats|rabbitmq|kafka [--json]
//
// Real Kafka and RocketMQ brokers, and ElasticMQ (an SQS-compatible server), on loopback for the tests, CI and users: Maven copies their jars into a
// cache outside the repository (fetch), the brokers run with small heaps on scratch data until stopped.
// See docs/brokers.md.
import console from 'node:console';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { clusterStatus, startCluster, stopCluster } from './lib/cluster.js';
import { elasticmq } from './lib/elasticmq.js';
import { kafka } from './lib/kafka.js';
import { kafkaCluster } from './lib/kafka-cluster.js';
import { natsCluster } from './lib/nats-cluster.js';
import { rabbitmqCluster } from './lib/rabbitmq-cluster.js';
import { brokerLayout, configurationDigest } from './lib/layout.js';
import {
  BrokersError,
  portOpen,
  requireJava,
  runningPid,
  stopProcess,
  withLock,
} from './lib/java-process.js';
import { fetched, fetchJars } from './lib/maven.js';
import { rocketmq } from './lib/rocketmq.js';
import { createGroup, createTopic } from './lib/rocketmq-admin.js';

const BROKERS = { kafka, rocketmq, elasticmq };
/** Three-node clusters for `oncemq chaos --cluster` (docs/brokers.md, "Clusters"). */
const CLUSTERS = { nats: natsCluster, rabbitmq: rabbitmqCluster, kafka: kafkaCluster };
const COMMANDS = ['fetch', 'start', 'stop', 'status'];
const USAGE = [
  `usage: npm run brokers -- ${COMMANDS.join('|')} [${Object.keys(BROKERS).join('|')} ...] [--json]`,
  '       npm run brokers -- rocketmq-topic NAME... [--type NORMAL|FIFO|DELAY|TRANSACTION] [--queues N]',
  '       npm run brokers -- rocketmq-group NAME... [--orderly] [--retries N]',
  '       npm run brokers -- start|stop|status --cluster nats|rabbitmq|kafka [--json]',
].join('\n');

const say = (line) => console.log(`brokers: ${line}`);

/** The pids of a broker's processes that run; `complete` when every one of them does. */
function processes(broker, layout) {
  const running = broker.processes.map((jvm) => ({
    ...jvm,
    pid: runningPid(layout.pidFile(jvm.id), jvm.mainClass),
  }));
  return { running, complete: running.every((jvm) => jvm.pid !== undefined) };
}

async function isReady(broker) {
  try {
    return await broker.ready();
  } catch {
    return false;
  }
}

async function fetch(broker, layout) {
  mkdirSync(layout.run, { recursive: true });
  await withLock(join(layout.run, 'lock'), () => fetchJars(layout, say));
}

/** Stops whatever of the broker runs (the last started first) and removes its scratch data. */
async function stopBroker(broker, layout) {
  const { running } = processes(broker, layout);
  for (const jvm of [...running].reverse()) {
    if (jvm.pid === undefined) continue;
    const ended = await stopProcess(jvm.pid);
    say(`${broker.name}: ${jvm.id} (pid ${jvm.pid}) ${ended}`);
    rmSync(layout.pidFile(jvm.id), { force: true });
  }
  rmSync(layout.data, { recursive: true, force: true });
  rmSync(layout.stamp, { force: true });
  return running.some((jvm) => jvm.pid !== undefined);
}

async function start(broker, layout) {
  if (!fetched(layout)) {
    throw new BrokersError(
      `${broker.name} ${layout.version} is not fetched: run npm run brokers -- fetch first`,
    );
  }
  requireJava();
  mkdirSync(layout.run, { recursive: true });
  await withLock(join(layout.run, 'lock'), async () => {
    const state = processes(broker, layout);
    const digest = configurationDigest(broker.name);
    const started = existsSync(layout.stamp) ? readFileSync(layout.stamp, 'utf8') : undefined;
    if (state.complete && started === digest && (await isReady(broker))) {
      say(`${broker.name} ${layout.version} already runs on ${broker.where}`);
      return;
    }
    // A broker half up (a process died, or never became ready), or one started with another
    // configuration than this checkout's, starts again from nothing.
    const reason =
      state.complete && started !== digest
        ? 'its configuration changed since it started'
        : 'what was left of an earlier start';
    if (await stopBroker(broker, layout)) say(`${broker.name}: stopped ${reason}`);
    for (const port of broker.ports) {
      if (await portOpen(port)) {
        throw new BrokersError(
          `port ${port} is taken by a process this command did not start; ${broker.name} needs ports ${broker.ports.join(', ')}`,
        );
      }
    }
    mkdirSync(layout.data, { recursive: true });
    const began = Date.now();
    try {
      await broker.start(layout);
      writeFileSync(layout.stamp, digest);
    } catch (error) {
      await stopBroker(broker, layout);
      throw error;
    }
    say(
      `${broker.name} ${layout.version} ready on ${broker.where} in ${((Date.now() - began) / 1000).toFixed(1)} s`,
    );
  });
}

async function stop(broker, layout) {
  mkdirSync(layout.run, { recursive: true });
  await withLock(join(layout.run, 'lock'), async () => {
    if (!(await stopBroker(broker, layout))) say(`${broker.name} was not running`);
  });
}

async function status(broker, layout) {
  const state = processes(broker, layout);
  const ready = state.complete && (await isReady(broker));
  return {
    name: broker.name,
    version: layout.version,
    fetched: fetched(layout),
    running: state.complete,
    ready,
    where: broker.where,
    lib: layout.lib,
    processes: state.running.map(({ id, pid }) => ({ id, pid: pid ?? null })),
    logs: broker.processes.map((jvm) => layout.logFile(jvm.id)),
  };
}

function describe(report) {
  const pids = report.processes.map(({ id, pid }) => `${id} ${pid === null ? 'stopped' : `pid ${pid}`}`);
  const state = report.ready
    ? `running and ready on ${report.where}`
    : report.running
      ? 'running, not ready'
      : 'stopped';
  const jars = report.fetched ? '' : ', not fetched';
  return `${report.name} ${report.version}: ${state} (${pids.join(', ')}${jars})`;
}

/** Splits `--flag value` / `--switch` options from the positional words. */
function parse(argv) {
  const words = [];
  const options = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) words.push(arg);
    else if (['--json', '--orderly'].includes(arg)) options[arg.slice(2)] = true;
    else if (['--type', '--queues', '--retries', '--cluster'].includes(arg) && i + 1 < argv.length)
      options[arg.slice(2)] = argv[++i];
    else throw new BrokersError(`unknown option ${arg}\n${USAGE}`);
  }
  return { words, options };
}

function count(value, option, fallback) {
  if (value === undefined) return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0)
    throw new BrokersError(`--${option} takes a whole number, not ${value}`);
  return number;
}

/** rocketmq-topic / rocketmq-group: what gRPC clients cannot create for themselves. */
async function administer(command, names, options) {
  if (names.length === 0) throw new BrokersError(`${command} needs at least one name\n${USAGE}`);
  for (const name of names) {
    if (command === 'rocketmq-topic') {
      const type = (options.type ?? 'NORMAL').toUpperCase();
      await createTopic({ topic: name, type, queues: count(options.queues, 'queues', 8) });
      say(`rocketmq: topic ${name} (${type}) created`);
    } else {
      const orderly = options.orderly === true;
      await createGroup({ group: name, orderly, retries: count(options.retries, 'retries', 16) });
      say(`rocketmq: group ${name}${orderly ? ' (orderly)' : ''} created`);
    }
  }
  return 0;
}

/** start / stop / status of one three-node cluster. */
async function clusterCommand(command, name, options) {
  const cluster = CLUSTERS[name];
  if (cluster === undefined) throw new BrokersError(`no cluster '${name}'\n${USAGE}`);
  if (command === 'start') await startCluster(cluster, say);
  else if (command === 'stop') await stopCluster(cluster, say);
  else if (command === 'status') {
    const report = clusterStatus(cluster);
    if (options.json === true) console.log(JSON.stringify(report, null, 2));
    else {
      const nodes = report.nodes.map((node) =>
        node.pid === null ? `${node.id} stopped` : `${node.id} pid ${node.pid} ${node.rssMiB} MiB`,
      );
      console.log(`cluster ${name}: ${report.running ? 'running' : 'not running'} (${nodes.join(', ')})`);
    }
    return report.running ? 0 : 3;
  } else throw new BrokersError(`${command} --cluster is not a command\n${USAGE}`);
  return 0;
}

async function main(argv) {
  const { words, options } = parse(argv);
  const [command, ...names] = words;
  if (command === 'rocketmq-topic' || command === 'rocketmq-group')
    return administer(command, names, options);
  if (command === undefined || !COMMANDS.includes(command)) throw new BrokersError(USAGE);
  if (options.cluster !== undefined) return clusterCommand(command, options.cluster, options);
  for (const name of names) if (!(name in BROKERS)) throw new BrokersError(`no broker '${name}'\n${USAGE}`);
  const chosen = (names.length > 0 ? names : Object.keys(BROKERS)).map((name) => BROKERS[name]);
  const actions = { fetch, start, stop };
  if (command === 'status') {
    const reports = [];
    for (const broker of chosen) reports.push(await status(broker, brokerLayout(broker.name)));
    if (options.json === true) console.log(JSON.stringify(reports, null, 2));
    else for (const report of reports) console.log(describe(report));
    return reports.every((report) => report.ready) ? 0 : 3;
  }
  for (const broker of chosen) await actions[command](broker, brokerLayout(broker.name));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    console.error(error instanceof Error ? `brokers: ${error.message}` : error);
    process.exitCode = 1;
  },
);
