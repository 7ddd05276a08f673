import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { ConfigError, errorText } from '../../core/errors.js';
import { partitionOf } from '../partitions.js';
import { UNIQUE_ID_HEADER, type OutgoingMessage, type PublishReceipt } from '../transport.js';
import { replyCode, type StreamCommands } from './redis-streams-commands.js';
import type { StreamSettings } from './redis-streams-config.js';
import { checkHeaderNames, messageFields } from './redis-streams-entry.js';
import { SHARD_SLOTS, streamBrokerId, validTopic } from './redis-streams-names.js';
import { PUBLISH } from './redis-streams-ordered-scripts.js';
import { replyText } from './redis-streams-replies.js';

/** A failure after which a publish is sent again: the connection broke before any reply came. */
function resendable(error: unknown): boolean {
  return error instanceof Error && error.cause !== undefined && replyCode(error) === undefined;
}

/**
 * Stores a message in its topic's stream (`XADD`; the reply is the broker's confirm) and, while the
 * topic has ordered groups, in the shard stream of its ordering key, in one script. When the
 * connection breaks before the reply, the message is sent again (a new copy with the same key) up to
 * `publishAttempts` times, backing off; a command that times out is not (it may still be stored), and fails.
 */
export class StreamPublisher {
  /** `open` answers the transport's commands, or throws once the transport is closed. */
  constructor(
    private readonly open: () => StreamCommands,
    private readonly settings: StreamSettings,
  ) {}

  /** Stores one message and resolves with its receipt once Redis replied. */
  async publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const commands = this.open();
    const { settings } = this;
    const topic = validTopic(message.topic);
    const headers: Record<string, string> = { ...message.headers };
    checkHeaderNames(headers);
    const messageId = randomUUID();
    headers[UNIQUE_ID_HEADER] = messageId;
    if (message.key !== undefined) headers[KEY_HEADER] = message.key;
    if (message.orderingKey !== undefined) headers[ORDERING_KEY_HEADER] = message.orderingKey;
    const { keys } = settings;
    const stream = keys.topic(topic);
    // The shard an ordered group reads it from: by the ordering key's hash, else any (no order to keep).
    const slot =
      message.orderingKey === undefined
        ? Math.floor(Math.random() * SHARD_SLOTS)
        : partitionOf(message.orderingKey, SHARD_SLOTS);
    const scriptKeys = [stream, keys.orderedGroups(topic), keys.shard(topic, slot)];
    const args = [
      settings.topology === 'check' ? '1' : '0',
      ...messageFields(headers, encodeBody(message.body)),
    ];
    for (let attempt = 1; ; attempt++) {
      let reply: unknown;
      try {
        reply = await commands.script(PUBLISH, scriptKeys, args);
      } catch (error) {
        if (attempt >= settings.publishAttempts || !resendable(error)) throw error;
        settings.logger.warn('oncemq: a publish lost its connection before the confirm; sending it again', {
          topic,
          attempt,
          error: errorText(error),
        });
        await sleep(Math.min(1000, 50 * 2 ** (attempt - 1)));
        continue;
      }
      const id = replyText(reply);
      if (id === null) {
        throw new ConfigError(
          'topic',
          `stream '${stream}' does not exist, and topology 'check' creates nothing`,
        );
      }
      return { brokerId: streamBrokerId(stream, id), topic, messageId, position: { stream, id } };
    }
  }
}
