import { TransportUnavailableError } from '../../core/errors.js';
import type { AmqpMessageLike } from './rabbitmq-driver.js';
import type { RabbitSettings } from './rabbitmq-config.js';
import type { RabbitConnection } from './rabbitmq-connection.js';
import { LOG_FENCE_HEADER, newBrokerId, TOPIC_HEADER } from './rabbitmq-message.js';

/** Messages of a topic's log read ahead at once while a new group's queue is filled from it. */
export const BACKFILL_PREFETCH = 256;

/** Where a back-fill reads and writes. */
export interface BackfillTarget {
  /** The topic's log (a stream). */
  readonly log: string;
  /** The group's work queue, already bound to the topic. */
  readonly queue: string;
}

/**
 * Copies a topic's log into a group's work queue that was just bound to the topic. A fence is
 * appended to the log first: everything before it is copied, everything after it reached the queue
 * through the binding. A message in both is one stored copy twice (same broker id): the ledger
 * absorbs it as a redelivery. Each copy is confirmed before the log read moves on. Returns how many
 * messages were copied.
 */
export async function backfillFromLog(
  connection: RabbitConnection,
  settings: RabbitSettings,
  target: BackfillTarget,
): Promise<number> {
  const fence = newBrokerId();
  const writer = await connection.channel('backfill', settings.publishTimeoutMs);
  const reader = await connection.channel('backfill-read', settings.publishTimeoutMs);
  try {
    await writer.publish('', target.log, Buffer.alloc(0), {
      messageId: fence,
      headers: { [LOG_FENCE_HEADER]: fence },
    });
    await reader.call('prefetch', (raw) => raw.prefetch(BACKFILL_PREFETCH));
    let copied = 0;
    await new Promise<void>((resolve, reject) => {
      let chain = Promise.resolve();
      let finished = false;
      const fail = (error: unknown): void => {
        finished = true;
        reject(error instanceof Error ? error : new Error(String(error)));
      };
      reader.onClose(() => {
        if (!finished) fail(new TransportUnavailableError(`the log ${target.log} closed during back-fill`));
      });
      const copy = (message: AmqpMessageLike): Promise<void> => {
        const headers = message.properties.headers ?? {};
        const marker = headers[LOG_FENCE_HEADER];
        if (marker === fence) {
          finished = true;
          resolve();
          return Promise.resolve();
        }
        if (marker !== undefined) return Promise.resolve(reader.ack(message)).then(() => undefined);
        const kept = { ...headers };
        delete kept['x-stream-offset'];
        // The copy reaches the queue by its name, not the topic: a foreign message (no topic header of
        // oncemq's publisher) keeps its topic in the header, as every copy through the default exchange does.
        kept[TOPIC_HEADER] ??= message.fields.routingKey;
        return writer
          .publish('', target.queue, message.content, {
            ...message.properties,
            messageId: message.properties.messageId ?? newBrokerId(),
            headers: kept,
          })
          .then(() => {
            copied++;
            reader.ack(message);
          });
      };
      reader.raw
        .consume(
          target.log,
          (message) => {
            if (message === null) {
              fail(new TransportUnavailableError(`the log ${target.log} was deleted during back-fill`));
              return;
            }
            chain = chain.then(() => (finished ? undefined : copy(message))).catch(fail);
          },
          { arguments: { 'x-stream-offset': 'first' } },
        )
        .catch(fail);
    });
    return copied;
  } finally {
    await reader.close();
    await writer.close();
  }
}
