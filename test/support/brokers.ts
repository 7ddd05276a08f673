import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { findService, type Service, type ServiceSpec } from './services.js';

const run = promisify(execFile);

/** `npm run brokers` without npm: brokers/brokers.js. */
export const BROKERS_SCRIPT = fileURLToPath(new URL('../../brokers/brokers.js', import.meta.url));

export const KAFKA_SERVICE = { variable: 'ONCEMQ_KAFKA_URL', defaultUrl: 'kafka://127.0.0.1:9092' } as const;
/** The proxy's gRPC endpoint; `?namesrv=host:port` names the name server (default: port 9876 on that host). */
export const ROCKETMQ_SERVICE = {
  variable: 'ONCEMQ_ROCKETMQ_URL',
  defaultUrl: 'rocketmq://127.0.0.1:8081',
} as const;

/** ElasticMQ's SQS API. */
export const ELASTICMQ_SERVICE = {
  variable: 'ONCEMQ_SQS_ENDPOINT',
  defaultUrl: 'http://127.0.0.1:9324',
} as const;

export type BrokerName = 'kafka' | 'rocketmq' | 'elasticmq';

/** One broker as `npm run brokers -- status --json` reports it. */
export interface BrokerStatus {
  readonly name: BrokerName;
  readonly version: string;
  readonly fetched: boolean;
  readonly running: boolean;
  readonly ready: boolean;
  readonly where: string;
  /** The folder of its jars (a Java class path is this folder + `/*`). */
  readonly lib: string;
  readonly processes: readonly { readonly id: string; readonly pid: number | null }[];
  readonly logs: readonly string[];
}

/** Runs `npm run brokers -- ...args`; resolves its output and exit code instead of throwing. */
export async function brokersCommand(
  args: readonly string[],
): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BROKERS_SCRIPT, ...args], { encoding: 'utf8' });
    return { stdout, stderr, code: 0 };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; code?: number | string };
    if (typeof failed.code !== 'number') throw error;
    return { stdout: failed.stdout ?? '', stderr: failed.stderr ?? '', code: failed.code };
  }
}

/** The local brokers as `npm run brokers -- status --json` reports them. */
export async function brokerStatus(): Promise<readonly BrokerStatus[]> {
  const { stdout } = await brokersCommand(['status', '--json']);
  return JSON.parse(stdout) as BrokerStatus[];
}

/**
 * When the suite uses the local broker (the variable is unset), starts it unless it runs already: the
 * first test file that needs a broker starts it, the others find it up, and the global setup
 * (brokers-setup.ts) stops it after the run. Not fetched (outside CI) → nothing happens and the suite skips.
 */
async function startLocalBroker(name: BrokerName, spec: ServiceSpec): Promise<void> {
  if (process.env[spec.variable] !== undefined) return;
  const status = (await brokerStatus()).find((broker) => broker.name === name);
  if (status === undefined || status.ready) return;
  if (!status.fetched && process.env.CI !== 'true') {
    console.warn(`skipping: ${name} is not fetched; run npm run brokers -- fetch, or set ${spec.variable}`);
    return;
  }
  const started = await brokersCommand(['start', name]);
  if (started.code !== 0) {
    const message = `npm run brokers -- start ${name} failed:\n${started.stdout}${started.stderr}`;
    if (process.env.CI === 'true') throw new Error(message);
    console.warn(`skipping: ${message}`);
  }
}

export interface KafkaBroker extends Service {
  /** `host:port` of the bootstrap broker, as Kafka clients take it. */
  readonly bootstrap: string;
}

/** Kafka for a suite: `ONCEMQ_KAFKA_URL`, else the local broker (started when fetched). */
export async function findKafka(): Promise<KafkaBroker> {
  await startLocalBroker('kafka', KAFKA_SERVICE);
  const service = await findService(KAFKA_SERVICE);
  return { ...service, bootstrap: new URL(service.url).host };
}

export interface RocketMQBroker extends Service {
  /** The proxy's gRPC endpoint, `host:port`, as `rocketmq-client-nodejs` takes it (`endpoints`). */
  readonly endpoints: string;
  /** The name server, `host:port`, for the admin tool. */
  readonly nameServer: string;
}

/** RocketMQ for a suite: `ONCEMQ_ROCKETMQ_URL`, else the local name server + proxy (started when fetched). */
export async function findRocketMQ(): Promise<RocketMQBroker> {
  await startLocalBroker('rocketmq', ROCKETMQ_SERVICE);
  const service = await findService(ROCKETMQ_SERVICE);
  const url = new URL(service.url);
  return {
    ...service,
    endpoints: url.host,
    nameServer: url.searchParams.get('namesrv') ?? `${url.hostname}:9876`,
  };
}

export type RocketMQMessageType = 'NORMAL' | 'FIFO' | 'DELAY' | 'TRANSACTION';

async function administer(args: readonly string[]): Promise<void> {
  const result = await brokersCommand(args);
  if (result.code !== 0) throw new Error(`npm run brokers -- ${args.join(' ')} failed:\n${result.stderr}`);
}

/**
 * Creates RocketMQ topics accepting one message type (gRPC clients never create topics, and a topic's
 * type is checked on every send), on the cluster `ONCEMQ_ROCKETMQ_URL` names.
 */
export function createRocketMQTopics(
  topics: readonly string[],
  type: RocketMQMessageType = 'NORMAL',
  queues = 8,
): Promise<void> {
  return administer(['rocketmq-topic', ...topics, '--type', type, '--queues', String(queues)]);
}

/**
 * Creates RocketMQ subscription groups (gRPC consumers of a group that does not exist never start):
 * `orderly` for FIFO topics; `retries` redeliveries, then `%DLQ%<group>`.
 */
export function createRocketMQGroups(
  groups: readonly string[],
  options: { orderly?: boolean; retries?: number } = {},
): Promise<void> {
  const args = ['rocketmq-group', ...groups, '--retries', String(options.retries ?? 16)];
  return administer(options.orderly === true ? [...args, '--orderly'] : args);
}

/** ElasticMQ (an SQS-compatible server) for a suite: `ONCEMQ_SQS_ENDPOINT`, else the local one (started when fetched). */
export async function findElasticMQ(): Promise<Service> {
  await startLocalBroker('elasticmq', ELASTICMQ_SERVICE);
  return findService(ELASTICMQ_SERVICE);
}
