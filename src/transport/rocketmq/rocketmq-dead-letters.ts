import { ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { ConfigError } from '../../core/errors.js';
import { validateGroup } from '../../core/group.js';
import {
  DEAD_LETTER_HEADERS,
  DEFAULT_DEAD_LETTER_LIMIT,
  readDeadLetter,
  refuseCutReplay,
  replayHeaders,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
} from '../dead-letters.js';
import { readQueue } from './rocketmq-queue-reader.js';
import type { RocketMQPublisher } from './rocketmq-publisher.js';
import {
  deadLetterTopic,
  MAX_DELIVERIES_REASON,
  REMOVED_PROPERTY,
  REPLAY_GROUP_PROPERTY,
} from './rocketmq-names.js';
import type { RocketMQTopology } from './rocketmq-topology.js';
import type { StoredMessage } from './rocketmq-stored-message.js';

/** What the dead-letter queue needs, once the transport is open. */
export interface RocketMQDeadLetterParts {
  readonly topology: RocketMQTopology;
  readonly publisher: RocketMQPublisher;
  readonly fifo: boolean;
}

/** RocketMQ's own properties are upper case (`UNIQ_KEY`, `1ST_POP_TIME`, `__BORNHOST`); oncemq's and users' are not. */
const SYSTEM_PROPERTY = /^(__)?[A-Z0-9][A-Z0-9_]*$/;

/** The topic a broker dead letter came from: its retry topic is `%RETRY%<group>_<topic>` (or `+` in v2 names). */
function originalTopic(group: string, system: Readonly<Record<string, string>>): string {
  const retry = system.RETRY_TOPIC ?? system.REAL_TOPIC ?? '';
  for (const prefix of [`%RETRY%${group}_`, `%RETRY%${group}+`]) {
    if (retry.startsWith(prefix)) return retry.slice(prefix.length);
  }
  return retry;
}

/** One dead letter as stored: oncemq's copy (with its reason) or the broker's (after `retryMaxTimes`). */
function toDeadLetter(group: string, id: string, stored: StoredMessage): DeadLetter {
  const headers: Record<string, string> = {};
  const system: Record<string, string> = {};
  for (const [name, value] of Object.entries(stored.properties)) {
    if (SYSTEM_PROPERTY.test(name)) system[name] = value;
    else headers[name] = value;
  }
  const details = {
    queueId: stored.queueId,
    queueOffset: stored.queueOffset,
    reconsumeTimes: stored.reconsumeTimes,
    properties: system,
  };
  if (headers[DEAD_LETTER_HEADERS.reason] !== undefined)
    return readDeadLetter(id, headers, stored.body, details);
  // The broker gave up on it: no reason travels with it, only what RocketMQ keeps.
  return readDeadLetter(
    id,
    {
      ...headers,
      [DEAD_LETTER_HEADERS.group]: group,
      [DEAD_LETTER_HEADERS.reason]: MAX_DELIVERIES_REASON,
      [DEAD_LETTER_HEADERS.topic]: originalTopic(group, system),
      [DEAD_LETTER_HEADERS.brokerId]: system.UNIQ_KEY ?? '',
      [DEAD_LETTER_HEADERS.deadAt]: stored.storedAt.toISOString(),
      // Measured on 5.5.0: the copy the proxy forwards carries reconsumeTimes = deliveries + 1.
      [DEAD_LETTER_HEADERS.deliveryCount]: String(Math.max(1, stored.reconsumeTimes - 1)),
    },
    stored.body,
    details,
  );
}

/**
 * `%DLQ%<group>`: read with pulls that commit nothing (listing consumes nothing). RocketMQ cannot
 * delete one message, so a replay or a purge appends a marker naming the dead letter to the same
 * queue, and a listing leaves out what a marker names. A replay is a new copy on the original topic
 * carrying `REPLAY_GROUP_PROPERTY`: its group processes it, every other group acks it unprocessed.
 * A dead letter's id is `<queue offset>@<broker address>`.
 */
export class RocketMQDeadLetters implements DeadLetters {
  readonly #open: () => Promise<RocketMQDeadLetterParts>;

  /** @internal made by the transport */
  constructor(open: () => Promise<RocketMQDeadLetterParts>) {
    this.#open = open;
  }

  async list(query: DeadLetterQuery): Promise<readonly DeadLetter[]> {
    const limit = query.limit ?? DEFAULT_DEAD_LETTER_LIMIT;
    const letters = (await this.#all(validateGroup(query.group))).filter(
      (letter) => query.reason === undefined || letter.reason === query.reason,
    );
    return letters.slice(0, limit);
  }

  async replay(group: string, ids: readonly string[]): Promise<number> {
    const parts = await this.#open();
    const letters = await this.#all(validateGroup(group));
    let replayed = 0;
    for (const id of new Set(ids)) {
      const letter = letters.find((candidate) => candidate.id === id);
      if (letter === undefined) continue;
      refuseCutReplay(letter);
      const headers: Record<string, string> = { ...replayHeaders(letter), [REPLAY_GROUP_PROPERTY]: group };
      const orderingKey = headers[ORDERING_KEY_HEADER] ?? letter.key ?? undefined;
      await parts.publisher.send({
        topic: letter.topic,
        body: Buffer.from(letter.body),
        properties: headers,
        keys: letter.key === null ? [] : [letter.key],
        messageGroup: parts.fifo ? (orderingKey ?? letter.id) : undefined,
      });
      await this.#remove(parts, group, id);
      replayed++;
    }
    return replayed;
  }

  async purge(group: string, ids: readonly string[]): Promise<number> {
    const parts = await this.#open();
    const known = new Set((await this.#all(validateGroup(group))).map((letter) => letter.id));
    let purged = 0;
    for (const id of new Set(ids)) {
      if (!known.has(id)) continue;
      await this.#remove(parts, group, id);
      purged++;
    }
    return purged;
  }

  async #remove(parts: RocketMQDeadLetterParts, group: string, id: string): Promise<void> {
    await parts.publisher.send({
      topic: deadLetterTopic(group),
      body: Buffer.from(id),
      properties: { [REMOVED_PROPERTY]: id },
    });
  }

  /** Every dead letter of `group` not yet replayed or purged, oldest first per broker. */
  async #all(group: string): Promise<DeadLetter[]> {
    const { topology } = await this.#open();
    const topic = deadLetterTopic(group);
    if (!(await topology.admin.topicExists(topic))) {
      throw new ConfigError(
        'group',
        `RocketMQ has no dead-letter topic ${topic}: group ${group} never subscribed through oncemq`,
      );
    }
    const letters: DeadLetter[] = [];
    const removed = new Set<string>();
    for (const master of await topology.admin.masters()) {
      for (const stored of await readQueue(master, group, topic, 0)) {
        const marker = stored.properties[REMOVED_PROPERTY];
        if (marker !== undefined) removed.add(marker);
        else letters.push(toDeadLetter(group, `${stored.queueOffset}@${master.host}:${master.port}`, stored));
      }
    }
    return letters.filter((letter) => !removed.has(letter.id));
  }
}
