/**
 * Topics and subscription groups of a RocketMQ cluster, through the name server and each master's
 * remoting port, as `mqadmin updateTopic` / `updateSubGroup` do and as `npm run brokers --
 * rocketmq-topic|rocketmq-group` does (brokers/lib/rocketmq-admin.js): gRPC clients create neither.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError } from '../../core/errors.js';
import {
  expectSuccess,
  parseAddress,
  remotingRequest,
  RequestCode,
  ResponseCode,
  type Address,
} from './rocketmq-remoting.js';

/** The message types a topic accepts (its `message.type` attribute). */
export type RocketMQMessageType = 'NORMAL' | 'FIFO' | 'DELAY' | 'TRANSACTION';

/** Read + write permission (`PermName.PERM_READ | PERM_WRITE`). */
const PERM_READ_WRITE = 6;

/** A topic to create on every broker of the cluster. */
export interface TopicSpec {
  /** The topic's name. */
  readonly topic: string;
  /** The message type it accepts. */
  readonly type: RocketMQMessageType;
  /** Its read and write queues per broker. */
  readonly queues: number;
}

/** A subscription group to create on every broker of the cluster. */
export interface GroupSpec {
  /** The group's name. */
  readonly group: string;
  /** Delivers each message group of a FIFO topic in order (`consumeMessageOrderly`). */
  readonly orderly: boolean;
  /** Redeliveries after the first delivery, then `%DLQ%<group>` (`retryMaxTimes`). */
  readonly retryMaxTimes: number;
}

/** Admin requests to one cluster, found through its name server. */
export class RocketMQAdmin {
  /** The name server's host and port. */
  readonly nameServer: Address;
  readonly #timeoutMs: number;

  constructor(nameServer: string, timeoutMs = 5000) {
    this.nameServer = parseAddress(nameServer);
    this.#timeoutMs = timeoutMs;
  }

  /** The master (broker id 0) addresses of every broker the name server knows. */
  async masters(): Promise<readonly Address[]> {
    const answer = await remotingRequest({
      ...this.nameServer,
      code: RequestCode.GET_BROKER_CLUSTER_INFO,
      timeoutMs: this.#timeoutMs,
    });
    const body = expectSuccess('reading the cluster', answer).body.toString('utf8');
    const found = [...body.matchAll(/"brokerAddrs":\{[^}]*?\b0:"([^"]+)"/g)].map((match) => match[1] ?? '');
    if (found.length === 0) {
      const { host, port } = this.nameServer;
      throw new ConfigError('nameServer', `the RocketMQ name server ${host}:${port} knows no broker`);
    }
    return [...new Set(found)].map(parseAddress);
  }

  /** Every topic the name server routes, the system's own among them. */
  async topics(): Promise<readonly string[]> {
    const answer = await remotingRequest({
      ...this.nameServer,
      code: RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
      timeoutMs: this.#timeoutMs,
    });
    const body = expectSuccess('listing topics', answer).body.toString('utf8');
    return (JSON.parse(body) as { topicList?: string[] }).topicList ?? [];
  }

  /** Whether the name server routes `topic`. */
  async topicExists(topic: string): Promise<boolean> {
    const answer = await remotingRequest({
      ...this.nameServer,
      code: RequestCode.GET_ROUTEINFO_BY_TOPIC,
      extFields: { topic },
      timeoutMs: this.#timeoutMs,
    });
    if (answer.code === ResponseCode.SUCCESS) return true;
    if (answer.code === ResponseCode.TOPIC_NOT_EXIST) return false;
    expectSuccess(`routing topic ${topic}`, answer);
    return false;
  }

  /** Each master routing `topic`, with the number of its read queues there. */
  async queues(topic: string): Promise<readonly { readonly master: Address; readonly queues: number }[]> {
    const answer = await remotingRequest({
      ...this.nameServer,
      code: RequestCode.GET_ROUTEINFO_BY_TOPIC,
      extFields: { topic },
      timeoutMs: this.#timeoutMs,
    });
    // fastjson: `brokerAddrs` has number keys (not JSON), so the two lists are read by pattern.
    const body = expectSuccess(`routing topic ${topic}`, answer).body.toString('utf8');
    const counts = new Map<string, number>();
    for (const match of body.matchAll(/"brokerName":"([^"]+)"[^}]*?"readQueueNums":(\d+)/g))
      counts.set(match[1] ?? '', Number(match[2]));
    const found: { master: Address; queues: number }[] = [];
    for (const match of body.matchAll(/"brokerAddrs":\{[^}]*?\b0:"([^"]+)"[^}]*\},"brokerName":"([^"]+)"/g)) {
      const queues = counts.get(match[2] ?? '');
      if (queues !== undefined) found.push({ master: parseAddress(match[1] ?? ''), queues });
    }
    return found;
  }

  /** The first (`min`) or next (`max`) offset of queue `queueId` of `topic` on `master`. */
  async queueOffset(master: Address, which: 'min' | 'max', topic: string, queueId: number): Promise<number> {
    const answer = await remotingRequest({
      ...master,
      code: which === 'min' ? RequestCode.GET_MIN_OFFSET : RequestCode.GET_MAX_OFFSET,
      extFields: { topic, queueId },
      timeoutMs: this.#timeoutMs,
    });
    return Number(expectSuccess(`reading offsets of ${topic}`, answer).extFields.offset ?? 0);
  }

  /** The offset `group` consumed queue `queueId` of `topic` to on `master`; `undefined` when it has none. */
  async consumerOffset(
    master: Address,
    group: string,
    topic: string,
    queueId: number,
  ): Promise<number | undefined> {
    const answer = await remotingRequest({
      ...master,
      code: RequestCode.QUERY_CONSUMER_OFFSET,
      extFields: { consumerGroup: group, topic, queueId, setZeroIfNotFound: false },
      timeoutMs: this.#timeoutMs,
    });
    if (answer.code === ResponseCode.QUERY_NOT_FOUND) return undefined;
    return Number(expectSuccess(`reading the offset of ${group} on ${topic}`, answer).extFields.offset);
  }

  /** Sets the offset `group` consumes queue `queueId` of `topic` from on `master`. */
  async commitOffset(
    master: Address,
    group: string,
    topic: string,
    queueId: number,
    offset: number,
  ): Promise<void> {
    const answer = await remotingRequest({
      ...master,
      code: RequestCode.UPDATE_CONSUMER_OFFSET,
      extFields: { consumerGroup: group, topic, queueId, commitOffset: offset },
      timeoutMs: this.#timeoutMs,
    });
    expectSuccess(`setting the offset of ${group} on ${topic}`, answer);
  }

  /** Whether every master knows the subscription group `group`. */
  async groupExists(group: string): Promise<boolean> {
    for (const master of await this.masters()) {
      const answer = await remotingRequest({
        ...master,
        code: RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        timeoutMs: this.#timeoutMs,
      });
      const body = expectSuccess('reading the subscription groups', answer).body.toString('utf8');
      if (!body.includes(`"groupName":${JSON.stringify(group)}`)) return false;
    }
    return true;
  }

  /** Creates (or updates) a topic on every master, then waits until the name server routes it. */
  async createTopic(spec: TopicSpec): Promise<void> {
    for (const master of await this.masters()) {
      const answer = await remotingRequest({
        ...master,
        code: RequestCode.UPDATE_AND_CREATE_TOPIC,
        extFields: {
          topic: spec.topic,
          defaultTopic: 'TBW102',
          readQueueNums: spec.queues,
          writeQueueNums: spec.queues,
          perm: PERM_READ_WRITE,
          topicFilterType: 'SINGLE_TAG',
          topicSysFlag: 0,
          order: false,
          attributes: `+message.type=${spec.type}`,
        },
        timeoutMs: this.#timeoutMs,
      });
      expectSuccess(`creating topic ${spec.topic}`, answer);
    }
    const deadline = Date.now() + 30_000;
    while (!(await this.topicExists(spec.topic))) {
      if (Date.now() > deadline) {
        throw new ConfigError(
          'topics',
          `the RocketMQ name server does not route ${spec.topic} 30s after creating it`,
        );
      }
      await sleep(100);
    }
  }

  /** Creates (or updates) a subscription group on every master. */
  async createGroup(spec: GroupSpec): Promise<void> {
    for (const master of await this.masters()) {
      const answer = await remotingRequest({
        ...master,
        code: RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        body: {
          groupName: spec.group,
          consumeEnable: true,
          consumeFromMinEnable: true,
          consumeBroadcastEnable: false,
          consumeMessageOrderly: spec.orderly,
          retryQueueNums: 1,
          retryMaxTimes: spec.retryMaxTimes,
          brokerId: 0,
          whichBrokerWhenConsumeSlowly: 1,
          notifyConsumerIdsChangedEnable: true,
        },
        timeoutMs: this.#timeoutMs,
      });
      expectSuccess(`creating group ${spec.group}`, answer);
    }
  }

  /** Deletes a topic from every master, then its route from the name server (`mqadmin deleteTopic`). */
  async deleteTopic(topic: string): Promise<void> {
    for (const master of await this.masters()) {
      const answer = await remotingRequest({
        ...master,
        code: RequestCode.DELETE_TOPIC_IN_BROKER,
        extFields: { topic },
        timeoutMs: this.#timeoutMs,
      });
      expectSuccess(`deleting topic ${topic}`, answer);
    }
    const answer = await remotingRequest({
      ...this.nameServer,
      code: RequestCode.DELETE_TOPIC_IN_NAMESRV,
      extFields: { topic },
      timeoutMs: this.#timeoutMs,
    });
    if (answer.code !== ResponseCode.TOPIC_NOT_EXIST) expectSuccess(`unrouting topic ${topic}`, answer);
  }

  /** Deletes a subscription group and its consume offsets from every master (`mqadmin deleteSubGroup`). */
  async deleteGroup(group: string): Promise<void> {
    for (const master of await this.masters()) {
      const answer = await remotingRequest({
        ...master,
        code: RequestCode.DELETE_SUBSCRIPTIONGROUP,
        extFields: { groupName: group, cleanOffset: true },
        timeoutMs: this.#timeoutMs,
      });
      expectSuccess(`deleting group ${group}`, answer);
    }
  }
}
