/**
 * Kafka: the oncemq transport beside `@platformatic/kafka` by hand: a topic of 4 partitions, acks from
 * every in-sync replica, a consumer group without autocommit (a new consumer for each drain) whose
 * stream is paused while `concurrency` records are in hand, and per partition a commit of the
 * contiguous prefix of records whose transaction committed (one commit in flight at a time, the next
 * one covering what finished meanwhile). The raw row stores its records 500 per request; the oncemq
 * row publishes through the transport, 256 at once, whose requests carry the records sent while one
 * was out.
 */
import { Admin, Consumer, Producer, type Message } from '@platformatic/kafka';
import { namespacedTransport } from '../../src/cli/namespaced-transport.js';
import { resolveServiceUrl } from '../../src/cli/connection.js';
import { brokersOfUrl } from '../../src/transport/kafka/kafka-config.js';
import { KAFKA_RUN_TRANSPORT } from '../../src/cli/brokers/kafka-run.js';
import { KafkaTransport } from '../../src/transport/kafka/kafka-transport.js';
import { PartitionOffsets } from '../../src/transport/kafka/kafka-partition-offsets.js';
import { GROUP, TOPIC } from '../points-db.js';
import { type TransportTarget } from '../transport-target.js';
import { PushBatcher } from './push-batcher.js';

const url = (): string => resolveServiceUrl('kafka').url;
const bootstrapBrokers = (): string[] => brokersOfUrl(url()).map(({ host, port }) => `${host}:${port}`);
/** Records of one publish request. */
const SEND_BATCH = 500;

type Record = Message;

export const target: TransportTarget = {
  name: 'kafka',
  url,
  async open(scope) {
    const transport = new KafkaTransport({ url: url(), prefix: scope });
    await transport.init();
    return {
      transport: namespacedTransport(transport, scope),
      cleanup: async () => {
        await KAFKA_RUN_TRANSPORT.cleanup({ url: url(), namespace: scope }, [GROUP]);
      },
    };
  },
  async raw(scope, options) {
    const topic = `${scope}-${TOPIC}`;
    const admin = new Admin({ clientId: 'oncemq-bench', bootstrapBrokers: bootstrapBrokers() });
    await admin.createTopics({ topics: [topic], partitions: 4, replicas: -1 });
    await admin.close();
    const producer = new Producer({ clientId: 'oncemq-bench', bootstrapBrokers: bootstrapBrokers() });
    // A new consumer for each drain, as the oncemq row subscribes anew for each: both join the group
    // from scratch (connections, coordinator, member id) inside the timed window.
    let consumer: Consumer | undefined;
    return {
      async publish(bodies) {
        for (let from = 0; from < bodies.length; from += SEND_BATCH) {
          const messages = bodies
            .slice(from, from + SEND_BATCH)
            .map((body) => ({ topic, value: Buffer.from(body) }));
          await producer.send({ messages, acks: -1 });
        }
      },
      async consume(work, acked, failed) {
        const member = new Consumer({
          clientId: 'oncemq-bench',
          bootstrapBrokers: bootstrapBrokers(),
          groupId: `${scope}-${GROUP}`,
          autocommit: false,
          maxWaitTime: 200,
        });
        consumer = member;
        const stream = await member.consume({
          topics: [topic],
          mode: 'committed',
          fallbackMode: 'earliest',
          autocommit: false,
          maxWaitTime: 200,
        });
        const partitions = new Map<number, PartitionOffsets>();
        let inHand = 0;
        let committing: Promise<void> | undefined;
        let again = false;
        const commit = async (): Promise<void> => {
          const offsets = [...partitions].flatMap(([partition, state]) => {
            const offset = state.committable();
            return offset === null ? [] : [{ topic, partition, offset, leaderEpoch: -1 }];
          });
          if (offsets.length === 0) return;
          await member.commit({ offsets });
          for (const { partition, offset } of offsets) partitions.get(partition)?.committed(offset);
        };
        const scheduleCommit = (): void => {
          if (committing !== undefined) {
            again = true;
            return;
          }
          committing = commit()
            .catch(failed)
            .finally(() => {
              committing = undefined;
              if (again) {
                again = false;
                scheduleCommit();
              }
            });
        };
        const batcher = new PushBatcher<Record>(options, {
          work,
          toRaw: (record) => ({
            body: record.value,
            brokerId: `${topic}/${record.partition}/${record.offset}`,
          }),
          ack: (record) => {
            partitions.get(record.partition)?.finish(record.offset);
            if (--inHand < options.concurrency && stream.isPaused()) stream.resume();
          },
          acked: (count) => {
            scheduleCommit();
            acked(count);
          },
          failed,
        });
        stream.on('data', (record: Record) => {
          let state = partitions.get(record.partition);
          if (state === undefined) partitions.set(record.partition, (state = new PartitionOffsets()));
          state.receive(record.offset);
          if (++inHand >= options.concurrency) stream.pause();
          batcher.push(record);
        });
        stream.on('error', failed);
        return {
          async stop() {
            await batcher.idle();
            await committing;
            await commit();
            await stream.close();
            await member.close();
            consumer = undefined;
          },
        };
      },
      async close() {
        await consumer?.close().catch(() => undefined);
        await producer.close().catch(() => undefined);
        await KAFKA_RUN_TRANSPORT.cleanup({ url: url(), namespace: scope }, [GROUP]);
      },
    };
  },
};
