import type { JetStreamManager, MsgRequest, NextMsgRequest, StoredMsg } from '@nats-io/jetstream';
import { DELIVERY_COUNT_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { TransportUnavailableError } from '../../core/errors.js';
import { HeaderText } from '../../core/header-text.js';
import { validateGroup } from '../../core/group.js';
import {
  DEFAULT_DEAD_LETTER_LIMIT,
  readDeadLetter,
  refuseCutReplay,
  replayHeaders,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
} from '../dead-letters.js';
import type { NatsSettings } from './nats-config.js';
import {
  deadLetterStream,
  deadLetterSubject,
  REPLAY_GROUP_HEADER,
  RETRY_DUE_HEADER,
  RETRY_PUBLISHED_HEADER,
  RETRY_TOPIC_HEADER,
  retrySubject,
  slotSubject,
  validNatsTopic,
} from './nats-names.js';
import { readPartitionCount } from './nats-partition-count.js';
import { repeatedHeaders, type NatsPublisher } from './nats-publisher.js';
import type { NatsTopology } from './nats-topology.js';

/** What the dead-letter queue needs, once the transport is open. */
export interface NatsDeadLetterParts {
  readonly settings: NatsSettings;
  readonly jsm: JetStreamManager;
  readonly topology: NatsTopology;
  readonly publisher: NatsPublisher;
}

/** A stored dead letter's headers read exactly: a name with several different values is no text header. */
function textHeaders(message: StoredMsg): HeaderText {
  const text = new HeaderText();
  for (const name of message.header.keys()) {
    for (const value of message.header.values(name)) text.text(name, value);
  }
  return text;
}

function unavailable(what: string, error: unknown): TransportUnavailableError {
  return new TransportUnavailableError(`NATS: ${what} failed: ${(error as Error).message}`, { cause: error });
}

/**
 * Dead letters in the `ONCEMQ-DLQ` stream, one subject per group; a dead letter's id is its
 * sequence in that stream. A replay stores a copy on the group's retry subject (only that group's
 * retry consumer reads it), due at once, with delivery count 1 and a `Nats-Msg-Id` of its own —
 * never the business key, which the topic's duplicate window may still hold — then deletes the
 * dead letter. A dead letter of an ordered group goes back where its key's order is kept instead:
 * into its topic's stream on its ordering key's slot, so the partition that owns the key runs it
 * after what it already holds of that key; it carries the group in `oncemq-replay-group`, and every
 * other group of the topic acks it unprocessed.
 */
export class NatsDeadLetters implements DeadLetters {
  readonly #open: () => Promise<NatsDeadLetterParts>;

  /** @internal made by the transport */
  constructor(open: () => Promise<NatsDeadLetterParts>) {
    this.#open = open;
  }

  async list(query: DeadLetterQuery): Promise<readonly DeadLetter[]> {
    const group = validateGroup(query.group);
    const limit = query.limit ?? DEFAULT_DEAD_LETTER_LIMIT;
    const parts = await this.#ready();
    const stream = deadLetterStream(parts.settings);
    const subject = deadLetterSubject(parts.settings, group);
    const letters: DeadLetter[] = [];
    for (let seq = 1; letters.length < limit;) {
      let message: StoredMsg | null;
      try {
        // The server (2.9+) answers "next by subject"; the manager's type names only seq and last-by-subject.
        const next: NextMsgRequest = { next_by_subj: subject, seq };
        message = await parts.jsm.streams.getMessage(stream, next as unknown as MsgRequest);
      } catch (error) {
        throw unavailable(`reading dead letters of group ${group}`, error);
      }
      if (message === null) break;
      seq = message.seq + 1;
      const letter = this.#letter(stream, message);
      if (query.reason === undefined || letter.reason === query.reason) letters.push(letter);
    }
    return letters;
  }

  async replay(group: string, ids: readonly string[]): Promise<number> {
    validateGroup(group);
    const parts = await this.#ready();
    await parts.topology.retryStream();
    const ordered = (await readPartitionCount(parts, group)) !== null;
    let replayed = 0;
    for (const id of ids) {
      const message = await this.#find(parts, group, id);
      if (message === null) continue;
      const letter = this.#letter(deadLetterStream(parts.settings), message);
      const repeated = repeatedHeaders(message.header, letter.headers);
      refuseCutReplay(letter);
      if (ordered) {
        const topic = validNatsTopic(letter.topic);
        await parts.topology.topicStream(topic);
        await parts.publisher.send({
          subject: slotSubject(parts.settings, topic, letter.headers[ORDERING_KEY_HEADER]),
          body: letter.body,
          headers: { ...replayHeaders(letter), [DELIVERY_COUNT_HEADER]: '1', [REPLAY_GROUP_HEADER]: group },
          repeated,
          msgId: `replay:${deadLetterStream(parts.settings)}:${message.seq}`,
        });
        if (await this.#delete(parts, message.seq)) replayed++;
        continue;
      }
      await parts.publisher.send({
        subject: retrySubject(parts.settings, group),
        body: letter.body,
        headers: {
          ...replayHeaders(letter),
          [DELIVERY_COUNT_HEADER]: '1',
          [RETRY_TOPIC_HEADER]: letter.topic,
          [RETRY_DUE_HEADER]: String(Date.now()),
          [RETRY_PUBLISHED_HEADER]: String(Date.now()),
        },
        repeated,
        // Unique to this dead letter: a replay repeated after a crash inside the window is dropped.
        msgId: `replay:${deadLetterStream(parts.settings)}:${message.seq}`,
      });
      if (await this.#delete(parts, message.seq)) replayed++;
    }
    return replayed;
  }

  async purge(group: string, ids: readonly string[]): Promise<number> {
    validateGroup(group);
    const parts = await this.#ready();
    let purged = 0;
    for (const id of ids) {
      const message = await this.#find(parts, group, id);
      if (message !== null && (await this.#delete(parts, message.seq))) purged++;
    }
    return purged;
  }

  async #ready(): Promise<NatsDeadLetterParts> {
    const parts = await this.#open();
    await parts.topology.deadLetterStream();
    return parts;
  }

  #letter(stream: string, message: StoredMsg): DeadLetter {
    const { headers, nonKey } = textHeaders(message);
    return readDeadLetter(String(message.seq), headers, message.data, {
      stream,
      seq: message.seq,
      ...(nonKey === undefined ? {} : { nonKeyHeaders: nonKey }),
    });
  }

  /** The dead letter `id` of `group`, or null when it is not there (or belongs to another group). */
  async #find(parts: NatsDeadLetterParts, group: string, id: string): Promise<StoredMsg | null> {
    if (!/^[1-9]\d{0,15}$/.test(id)) return null;
    let message: StoredMsg | null;
    try {
      message = await parts.jsm.streams.getMessage(deadLetterStream(parts.settings), { seq: Number(id) });
    } catch (error) {
      throw unavailable(`reading dead letter ${id}`, error);
    }
    return message !== null && message.subject === deadLetterSubject(parts.settings, group) ? message : null;
  }

  async #delete(parts: NatsDeadLetterParts, seq: number): Promise<boolean> {
    try {
      return await parts.jsm.streams.deleteMessage(deadLetterStream(parts.settings), seq, false);
    } catch (error) {
      if ((error as Error).message.includes('no message found')) return false;
      throw unavailable(`deleting dead letter ${seq}`, error);
    }
  }
}
