/**
 * RocketMQ: the oncemq transport beside `rocketmq-client-nodejs` by hand: a NORMAL topic of 8 queues and
 * a subscription group made through the admin requests, a producer, and a `SimpleConsumer` receiving as
 * many messages as there are free slots (at most 32 a receive), acking each after its transaction
 * committed. Both sides use the proxy's shortest long poll (1 s).
 */
import { Producer, SimpleConsumer, type MessageView } from 'rocketmq-client-nodejs';
import { namespacedName, namespacedTransport } from '../../src/cli/namespaced-transport.js';
import { resolveServiceUrl } from '../../src/cli/connection.js';
import { parseRocketMQUrl } from '../../src/transport/rocketmq/rocketmq-config.js';
import { RocketMQAdmin } from '../../src/transport/rocketmq/rocketmq-admin.js';
import { ROCKETMQ_RUN_TRANSPORT } from '../../src/cli/brokers/rocketmq-run.js';
import { RocketMQTransport } from '../../src/transport/rocketmq/rocketmq-transport.js';
import { GROUP, TOPIC } from '../points-db.js';
import { inWindows, type TransportTarget } from '../transport-target.js';
import { PushBatcher } from './push-batcher.js';

const url = (): string => resolveServiceUrl('rocketmq').url;
/** Most messages one receive asks for (the proxy's limit). */
const MAX_RECEIVE = 32;
const LONG_POLL_MS = 1000;
const INVISIBLE_MS = 30_000;
/**
 * Sends in flight at once: more, on the loaded 2-core machine, made sends time out and the client send
 * them again (a second copy of the payment); a send is tried once here, so a failure fails the row.
 */
const SEND_WINDOW = 64;
const quiet = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
};

export const target: TransportTarget = {
  name: 'rocketmq',
  url: () => `http://${parseRocketMQUrl(url()).endpoints}`,
  note: "longPoll '1s', requestTimeout '10s'",
  async open(scope) {
    const transport = new RocketMQTransport({ url: url(), longPoll: '1s', requestTimeout: '10s' });
    await transport.init();
    return {
      transport: namespacedTransport(transport, scope),
      cleanup: () => ROCKETMQ_RUN_TRANSPORT.cleanup({ url: url(), namespace: scope }, [GROUP]),
    };
  },
  async raw(scope, options) {
    const { endpoints, nameServer } = parseRocketMQUrl(url());
    const topic = namespacedName(scope, TOPIC);
    const group = namespacedName(scope, GROUP);
    const admin = new RocketMQAdmin(nameServer);
    await admin.createTopic({ topic, type: 'NORMAL', queues: 8 });
    await admin.createGroup({ group, orderly: false, retryMaxTimes: 16 });
    const producer = new Producer({
      endpoints,
      namespace: '',
      logger: quiet,
      requestTimeout: 10_000,
      maxAttempts: 1,
    });
    await producer.startup();
    const consumer = new SimpleConsumer({
      endpoints,
      namespace: '',
      logger: quiet,
      consumerGroup: group,
      subscriptions: new Map([[topic, '*']]),
      awaitDuration: LONG_POLL_MS,
    });
    await consumer.startup();
    return {
      publish: (bodies) =>
        inWindows(bodies.length, SEND_WINDOW, (i) =>
          producer.send({ topic, body: Buffer.from(bodies[i] ?? '') }),
        ),
      consume(work, acked, failed) {
        let inHand = 0;
        let stopping = false;
        let freed: () => void = () => undefined;
        const batcher = new PushBatcher<MessageView>(options, {
          work,
          toRaw: (view) => ({ body: view.body, brokerId: view.messageId }),
          ack: (view) => {
            consumer.ack(view).then(() => {
              inHand--;
              freed();
            }, failed);
          },
          acked,
          failed,
        });
        const loop = (async () => {
          while (!stopping) {
            const want = Math.min(MAX_RECEIVE, options.concurrency - inHand);
            if (want <= 0) {
              await new Promise<void>((resolve) => (freed = resolve));
              continue;
            }
            inHand += want;
            const views = await consumer.receive(want, INVISIBLE_MS).catch(() => []);
            inHand -= want - views.length;
            for (const view of views) batcher.push(view);
          }
        })();
        return Promise.resolve({
          async stop() {
            stopping = true;
            freed();
            await loop;
            await batcher.idle();
          },
        });
      },
      async close() {
        await consumer.shutdown().catch(() => undefined);
        await producer.shutdown().catch(() => undefined);
        await ROCKETMQ_RUN_TRANSPORT.cleanup({ url: url(), namespace: scope }, [GROUP]);
      },
    };
  },
};
