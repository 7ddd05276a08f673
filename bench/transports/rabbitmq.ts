/**
 * RabbitMQ: the oncemq transport (a quorum work queue per group) beside amqplib by hand: a direct
 * exchange, one quorum queue bound to the topic, confirmed persistent publishes, a consumer with the
 * same prefetch acking each message after its transaction committed.
 */
import { randomUUID } from 'node:crypto';
import amqplib from 'amqplib';
import { resolveServiceUrl } from '../../src/cli/connection.js';
import { RabbitTransport } from '../../src/transport/rabbitmq/rabbitmq-transport.js';
import { TOPIC } from '../points-db.js';
import { inWindows, PUBLISH_WINDOW, type TransportTarget } from '../transport-target.js';
import { PushBatcher } from './push-batcher.js';

const url = (): string => resolveServiceUrl('rabbitmq').url;

/** Deletes queues and exchanges, each on a channel of its own (a failed delete closes its channel). */
async function deleteTopology(queues: Iterable<string>, exchanges: Iterable<string>): Promise<void> {
  const connection = await amqplib.connect(url());
  try {
    const remove = async (step: (channel: amqplib.Channel) => Promise<unknown>): Promise<void> => {
      const channel = await connection.createChannel();
      channel.on('error', () => undefined);
      await step(channel).catch(() => undefined);
      await channel.close().catch(() => undefined);
    };
    for (const queue of queues) await remove((channel) => channel.deleteQueue(queue));
    for (const exchange of exchanges) await remove((channel) => channel.deleteExchange(exchange));
  } finally {
    await connection.close();
  }
}

export const target: TransportTarget = {
  name: 'rabbitmq',
  url,
  note: 'retention false (no topic log)',
  async open(scope) {
    // No topic log: the raw side keeps none either, and the group's queue exists before publishing.
    const transport = new RabbitTransport({ url: url(), prefix: scope, exchange: scope, retention: false });
    await transport.init();
    return {
      transport,
      cleanup: () => deleteTopology(transport.declared.queues, transport.declared.exchanges),
    };
  },
  async raw(scope, options) {
    const connection = await amqplib.connect(url());
    const publisher = await connection.createConfirmChannel();
    const queue = `${scope}.points`;
    await publisher.assertExchange(scope, 'direct', { durable: true });
    await publisher.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await publisher.bindQueue(queue, scope, TOPIC);
    return {
      publish: (bodies) =>
        inWindows(
          bodies.length,
          PUBLISH_WINDOW,
          (i) =>
            new Promise<void>((resolve, reject) => {
              publisher.publish(
                scope,
                TOPIC,
                Buffer.from(bodies[i] ?? ''),
                { persistent: true, messageId: randomUUID() },
                (error: unknown) => {
                  if (error === null || error === undefined) resolve();
                  else reject(error instanceof Error ? error : new Error('publish not confirmed'));
                },
              );
            }),
        ),
      async consume(work, acked, failed) {
        const channel = await connection.createChannel();
        await channel.prefetch(options.concurrency);
        const batcher = new PushBatcher<amqplib.ConsumeMessage>(options, {
          work,
          toRaw: (message) => ({
            body: message.content,
            brokerId: String(message.properties.messageId),
          }),
          ack: (message) => channel.ack(message),
          acked,
          failed,
        });
        const { consumerTag } = await channel.consume(queue, (message) => {
          if (message !== null) batcher.push(message);
        });
        return {
          async stop() {
            await channel.cancel(consumerTag);
            await batcher.idle();
            await channel.close();
          },
        };
      },
      async close() {
        await publisher.close().catch(() => undefined);
        await connection.close().catch(() => undefined);
        await deleteTopology([queue], [scope]);
      },
    };
  },
};
