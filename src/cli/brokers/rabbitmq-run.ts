import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { ClusterState } from '../cluster-nodes.js';
import type { RunTransport, RunTransportTarget } from '../run-transports.js';
import { loadDriver } from '../stores.js';
import type { AmqpConnectionLike } from '../../transport/rabbitmq/rabbitmq-driver.js';
import {
  DEFAULT_RABBIT_TRANSPORT_CONFIG,
  DEFAULT_RABBITMQ_DELAY_LEVELS,
} from '../../transport/rabbitmq/rabbitmq-config.js';
import { RabbitNames } from '../../transport/rabbitmq/rabbitmq-names.js';
import { RabbitTransport } from '../../transport/rabbitmq/rabbitmq-transport.js';
import { parseDuration } from '../../core/duration.js';
import { SILENT_LOGGER } from '../../core/logger.js';

const run = promisify(execFile);

/**
 * The node leading the group's quorum queue, as `rabbitmq-queues quorum_status` says on the first node
 * that answers (the nodes' own admin tools and cookie, from the cluster's description). It asks about
 * that one queue: `rabbitmqctl list_queues` asks every queue of every node and, while a node was down
 * or events flowed, did not answer within 20 s in a 50,000-event run.
 */
async function quorumLeader(
  { namespace }: RunTransportTarget,
  _topic: string,
  group: string,
  cluster: ClusterState,
): Promise<string | undefined> {
  const admin = cluster.admin;
  if (admin === undefined) return undefined;
  const tool = join(dirname(admin.command), 'rabbitmq-queues');
  const queue = new RabbitNames(namespace).work(group);
  for (const node of cluster.nodes) {
    if (node.name === undefined) continue;
    try {
      const { stdout } = await run(
        tool,
        ['-n', node.name, '-q', '--formatter', 'json', 'quorum_status', queue],
        {
          env: { ...process.env, ...admin.env },
          timeout: 45_000,
        },
      );
      const members = JSON.parse(stdout) as { 'Node Name'?: string; 'Raft State'?: string }[];
      const leader = members.find((member) => member['Raft State'] === 'leader')?.['Node Name'];
      if (leader !== undefined) return leader;
    } catch {
      // that node is down or busy: ask the next
    }
  }
  return undefined;
}

/**
 * RabbitMQ for `oncemq demo` and `oncemq chaos`: prefix and exchange are the run's namespace, no
 * topic log (every group subscribes before the first publish), quick reconnects.
 */
export const RABBIT_RUN_TRANSPORT = Object.freeze<RunTransport>({
  service: 'rabbitmq',
  // amqplib takes one URL: a balancer in front of the nodes spreads the connections and skips a dead node
  cluster: { reach: 'balancer', leader: quorumLeader },
  open: async ({ url, namespace }) => {
    const transport = new RabbitTransport({
      url,
      prefix: namespace,
      exchange: namespace,
      retention: false,
      reconnectDelay: '50ms',
      maxReconnectDelay: '500ms',
      failureBackoff: '100ms',
      // A run cuts connections on purpose: their lines would drown its summary.
      logger: SILENT_LOGGER,
    });
    await transport.init();
    return transport;
  },
  cleanup: async ({ url, namespace }, groups) => {
    type Connect = (url: string) => Promise<AmqpConnectionLike>;
    const module = (await loadDriver(() => import('amqplib'), 'amqplib')) as unknown as {
      connect?: Connect;
      default?: { connect: Connect };
    };
    const connect = module.connect ?? module.default?.connect;
    if (connect === undefined) throw new Error('amqplib has no connect()');
    const names = new RabbitNames(namespace);
    const queues = groups.flatMap((group) => [
      names.work(group),
      names.dead(group),
      ...DEFAULT_RABBITMQ_DELAY_LEVELS.map((level) => names.retry(group, parseDuration(level, 'level'))),
      // an ordered group's partition queues and the marker of its count (a run opens the default count)
      ...Array.from({ length: DEFAULT_RABBIT_TRANSPORT_CONFIG.partitions }, (_, index) =>
        names.partition(group, index),
      ),
      names.partitionMarker(group),
    ]);
    const connection = await connect(url);
    try {
      const channel = await connection.createConfirmChannel();
      for (const queue of queues) await channel.deleteQueue(queue);
      await channel.deleteExchange(namespace);
      await channel.close();
    } finally {
      await connection.close();
    }
  },
});
