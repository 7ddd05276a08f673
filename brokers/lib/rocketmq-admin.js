// Topics and subscription groups on a RocketMQ cluster, through the name server and the brokers'
// remoting port, as `mqadmin updateTopic` / `updateSubGroup` do (gRPC clients never create either).
import { URL } from 'node:url';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { expectSuccess, remotingRequest, RequestCode } from './rocketmq-remoting.js';

/** The message types a topic accepts (its `message.type` attribute). */
export const MESSAGE_TYPES = ['NORMAL', 'FIFO', 'DELAY', 'TRANSACTION'];

/** Read + write permission (PermName.PERM_READ | PERM_WRITE). */
const PERM_READ_WRITE = 6;

/**
 * The name server that `ONCEMQ_ROCKETMQ_URL` names (`rocketmq://proxy-host:8081?namesrv=host:9876`; without
 * `namesrv`, port 9876 on the proxy's host), else the local one.
 */
export function nameServer() {
  const configured = process.env.ONCEMQ_ROCKETMQ_URL;
  const url = new URL(
    configured === undefined || configured === '' ? 'rocketmq://127.0.0.1:8081' : configured,
  );
  const address = url.searchParams.get('namesrv') ?? `${url.hostname}:9876`;
  const [host, port] = address.split(':');
  return { host, port: Number(port) };
}

function split(address) {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
}

/** The master (broker id 0) addresses of every broker the name server knows. */
async function masters(namesrv) {
  const answer = await remotingRequest({ ...namesrv, code: RequestCode.GET_BROKER_CLUSTER_INFO });
  const body = expectSuccess('GET_BROKER_CLUSTER_INFO', answer).body;
  const found = [...body.matchAll(/"brokerAddrs":\{[^}]*?\b0:"([^"]+)"/g)].map((match) => match[1]);
  if (found.length === 0) throw new Error(`the name server ${namesrv.host}:${namesrv.port} knows no broker`);
  return [...new Set(found)];
}

/** Waits until the name server routes `topic` (the broker registers a new topic shortly after it). */
async function routed(namesrv, topic, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await remotingRequest({
      ...namesrv,
      code: RequestCode.GET_ROUTEINFO_BY_TOPIC,
      extFields: { topic },
    });
    if (answer.code === 0) return;
    if (Date.now() > deadline) throw new Error(`the name server does not route ${topic}: ${answer.remark}`);
    await sleep(100);
  }
}

/** Creates (or updates) `topic` on every master with `queues` queues accepting `type` messages. */
export async function createTopic({ topic, type = 'NORMAL', queues = 8 }, namesrv = nameServer()) {
  if (!MESSAGE_TYPES.includes(type))
    throw new Error(`message type ${type} is not one of ${MESSAGE_TYPES.join(', ')}`);
  for (const address of await masters(namesrv)) {
    const answer = await remotingRequest({
      ...split(address),
      code: RequestCode.UPDATE_AND_CREATE_TOPIC,
      extFields: {
        topic,
        defaultTopic: 'TBW102',
        readQueueNums: queues,
        writeQueueNums: queues,
        perm: PERM_READ_WRITE,
        topicFilterType: 'SINGLE_TAG',
        topicSysFlag: 0,
        order: false,
        attributes: `+message.type=${type}`,
      },
    });
    expectSuccess(`creating topic ${topic} on ${address}`, answer);
  }
  await routed(namesrv, topic);
}

/**
 * Creates (or updates) the subscription group `group` on every master: `orderly` delivers each message
 * group of a FIFO topic in order; `retries` deliveries after the first, then `%DLQ%<group>`.
 */
export async function createGroup({ group, orderly = false, retries = 16 }, namesrv = nameServer()) {
  for (const address of await masters(namesrv)) {
    const answer = await remotingRequest({
      ...split(address),
      code: RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
      body: {
        groupName: group,
        consumeEnable: true,
        consumeFromMinEnable: true,
        consumeBroadcastEnable: false,
        consumeMessageOrderly: orderly,
        retryQueueNums: 1,
        retryMaxTimes: retries,
        brokerId: 0,
        whichBrokerWhenConsumeSlowly: 1,
        notifyConsumerIdsChangedEnable: true,
      },
    });
    expectSuccess(`creating group ${group} on ${address}`, answer);
  }
}
