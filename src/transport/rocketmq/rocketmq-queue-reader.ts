/**
 * Reads a topic's queues on one master without consuming them: a remoting pull that commits no
 * offset and registers no consumer, from the queue's first offset to its last.
 */
import {
  expectSuccess,
  remotingRequest,
  RequestCode,
  ResponseCode,
  type Address,
} from './rocketmq-remoting.js';
import { decodeStoredMessages, type StoredMessage } from './rocketmq-stored-message.js';

/** `PullSysFlag.FLAG_SUBSCRIPTION`: the subscription travels with the request (no offset commit, no suspend). */
const FLAG_SUBSCRIPTION = 0x1 << 2;
const PULL_BATCH = 32;

async function offset(master: Address, code: number, topic: string, queueId: number): Promise<number> {
  const answer = await remotingRequest({ ...master, code, extFields: { topic, queueId } });
  return Number(expectSuccess(`reading offsets of ${topic}`, answer).extFields.offset ?? 0);
}

/** Every message stored in queue `queueId` of `topic` on `master`, oldest first. */
export async function readQueue(
  master: Address,
  group: string,
  topic: string,
  queueId: number,
): Promise<StoredMessage[]> {
  const messages: StoredMessage[] = [];
  let next = await offset(master, RequestCode.GET_MIN_OFFSET, topic, queueId);
  let retries = 0;
  const end = await offset(master, RequestCode.GET_MAX_OFFSET, topic, queueId);
  while (next < end) {
    const answer = await remotingRequest({
      ...master,
      code: RequestCode.PULL_MESSAGE,
      extFields: {
        consumerGroup: group,
        topic,
        queueId,
        queueOffset: next,
        maxMsgNums: PULL_BATCH,
        sysFlag: FLAG_SUBSCRIPTION,
        commitOffset: 0,
        suspendTimeoutMillis: 0,
        subscription: '*',
        subVersion: Date.now(),
        expressionType: 'TAG',
      },
    });
    if (answer.code === ResponseCode.PULL_NOT_FOUND || answer.code === ResponseCode.PULL_OFFSET_MOVED) {
      const moved = Number(answer.extFields.nextBeginOffset ?? next);
      if (moved <= next) break;
      next = moved;
      continue;
    }
    if (answer.code === ResponseCode.PULL_RETRY_IMMEDIATELY && retries++ < 3) continue;
    const found = decodeStoredMessages(expectSuccess(`reading ${topic}`, answer).body);
    if (found.length === 0) break;
    messages.push(...found);
    next = Number(answer.extFields.nextBeginOffset ?? (found.at(-1)?.queueOffset ?? next) + 1);
  }
  return messages;
}
