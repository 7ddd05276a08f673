/**
 * NATS JetStream: the oncemq transport beside `@nats-io/jetstream` by hand: a file stream for the
 * topic, a durable pull consumer whose max ack pending is the concurrency, confirmed publishes, and
 * `consume()` acking each message after its transaction committed.
 */
import { AckPolicy, jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { resolveServiceUrl } from '../../src/cli/connection.js';
import { NatsTransport } from '../../src/transport/nats/nats-transport.js';
import { GROUP, TOPIC } from '../points-db.js';
import { inWindows, PUBLISH_WINDOW, type TransportTarget } from '../transport-target.js';
import { PushBatcher } from './push-batcher.js';

const servers = (): string => resolveServiceUrl('nats').url;

/** Deletes every stream whose name starts with `prefix`. */
async function deleteStreams(prefix: string): Promise<void> {
  const connection = await connect({ servers: servers() });
  try {
    const jsm = await jetstreamManager(connection);
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(prefix)) await jsm.streams.delete(name);
    }
  } finally {
    await connection.close();
  }
}

export const target: TransportTarget = {
  name: 'nats',
  url: servers,
  note: "pullExpires '1s'",
  open(scope) {
    // A short pull only shortens the wait when the subscription closes on an empty stream.
    const transport = new NatsTransport({
      servers: servers(),
      streamPrefix: scope,
      subjectPrefix: scope,
      pullExpires: '1s',
    });
    return Promise.resolve({ transport, cleanup: () => deleteStreams(scope) });
  },
  async raw(scope, options) {
    const connection = await connect({ servers: servers() });
    const jsm = await jetstreamManager(connection);
    const js = jetstream(connection);
    const stream = `${scope}_${TOPIC}`;
    const subject = `${scope}.${TOPIC}`;
    await jsm.streams.add({ name: stream, subjects: [subject] });
    await jsm.consumers.add(stream, {
      durable_name: GROUP,
      ack_policy: AckPolicy.Explicit,
      max_ack_pending: options.concurrency,
    });
    return {
      publish: (bodies) =>
        inWindows(bodies.length, PUBLISH_WINDOW, (i) => js.publish(subject, bodies[i] ?? '')),
      async consume(work, acked, failed) {
        const consumer = await js.consumers.get(stream, GROUP);
        const messages = await consumer.consume({ max_messages: options.concurrency });
        const batcher = new PushBatcher<JsMsg>(options, {
          work,
          toRaw: (message) => ({ body: message.data, brokerId: `${stream}:${message.seq}` }),
          ack: (message) => message.ack(),
          acked,
          failed,
        });
        const loop = (async () => {
          for await (const message of messages) batcher.push(message);
        })();
        return {
          async stop() {
            await messages.close();
            await loop;
            await batcher.idle();
            await connection.flush();
          },
        };
      },
      async close() {
        await connection.close();
        await deleteStreams(stream);
      },
    };
  },
};
