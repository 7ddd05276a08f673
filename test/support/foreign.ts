import amqplib from 'amqplib';
import { Producer } from '@platformatic/kafka';
import type { NatsConnection } from '@nats-io/transport-node';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import type { ForeignHeaderValue, ForeignMessage, ForeignProducer } from 'oncemq/conformance';
import { directConnection } from './nats.js';
import type { RawRedis } from './redis-streams.js';
import { Producer as RocketMQProducer } from 'rocketmq-client-nodejs';

/** A foreign producer holding a connection of its own, closed after the case. */
export interface ClosableForeign extends ForeignProducer {
  close(): Promise<void>;
}

const asText = (value: ForeignHeaderValue): string => {
  if (value.type === 'text') return value.value;
  if (value.type === 'bytes') return Buffer.from(value.value).toString('utf8');
  return String(value.value);
};

/** Opens the connection on the first publish, so a case that sends nothing opens none. */
function lazy<T>(open: () => Promise<T>): { get(): Promise<T>; opened(): Promise<T> | undefined } {
  let connection: Promise<T> | undefined;
  return { get: () => (connection ??= open()), opened: () => connection };
}

/** Another AMQP producer: amqplib on a confirm channel, each header in its own AMQP type. */
export function rabbitForeign(url: string, exchange: string): ClosableForeign {
  const connection = lazy(async () => {
    const conn = await amqplib.connect(url);
    return { conn, channel: await conn.createConfirmChannel() };
  });
  const amqpValue = (value: ForeignHeaderValue): unknown => {
    switch (value.type) {
      case 'text':
        return value.value;
      case 'bytes':
        return Buffer.from(value.value);
      case 'integer':
        return { '!': 'long', value: value.value };
      case 'float':
        return { '!': 'double', value: value.value };
      case 'boolean':
        return value.value;
    }
  };
  return {
    headerTypes: ['text', 'bytes', 'integer', 'float', 'boolean'],
    repeatedHeaders: false,
    async publish(topic: string, message: ForeignMessage) {
      const { channel } = await connection.get();
      const headers = Object.fromEntries(message.headers.map(([name, value]) => [name, amqpValue(value)]));
      await new Promise<void>((resolve, reject) => {
        channel.publish(exchange, topic, Buffer.from(message.body), { headers, persistent: true }, (error) =>
          error === null || error === undefined ? resolve() : reject(error as Error),
        );
      });
    },
    async close() {
      const opened = await connection.opened()?.catch(() => undefined);
      await opened?.conn.close().catch(() => undefined);
    },
  };
}

/** Another JetStream producer: text headers, a name appended once per value, on the topic's subject. */
export function natsForeign(url: string, subjectPrefix: string): ClosableForeign {
  const connection = lazy<NatsConnection>(() => directConnection(url));
  return {
    headerTypes: ['text'],
    repeatedHeaders: true,
    async publish(topic: string, message: ForeignMessage) {
      const nc = await connection.get();
      const h = natsHeaders();
      for (const [name, value] of message.headers) h.append(name, asText(value));
      await jetstream(nc).publish(`${subjectPrefix}.${topic}`, message.body, { headers: h });
    },
    async close() {
      const opened = await connection.opened()?.catch(() => undefined);
      await opened?.close().catch(() => undefined);
    },
  };
}

/** Another Redis producer: `XADD` with each header a field of its own, values as raw bytes. */
export function streamsForeign(admin: RawRedis, prefix: string): ForeignProducer {
  return {
    headerTypes: ['text', 'bytes'],
    repeatedHeaders: true,
    async publish(topic: string, message: ForeignMessage) {
      const fields: (string | Buffer)[] = ['body', Buffer.from(message.body)];
      for (const [name, value] of message.headers) {
        fields.push(name, value.type === 'bytes' ? Buffer.from(value.value) : asText(value));
      }
      await admin.send('XADD', `${prefix}:stream:${topic}`, '*', ...fields);
    },
  };
}

/** Another Kafka producer: headers as bytes, a name sent once per value. */
export function kafkaForeign(bootstrap: string): ClosableForeign {
  const connection = lazy(() =>
    Promise.resolve(new Producer({ clientId: 'oncemq-foreign', bootstrapBrokers: [bootstrap] })),
  );
  return {
    headerTypes: ['text', 'bytes'],
    repeatedHeaders: true,
    async publish(topic: string, message: ForeignMessage) {
      const producer = await connection.get();
      const headers = new Map<Buffer, Buffer>();
      for (const [name, value] of message.headers) {
        headers.set(
          Buffer.from(name),
          value.type === 'bytes' ? Buffer.from(value.value) : Buffer.from(asText(value)),
        );
      }
      await producer.send({ messages: [{ topic, value: Buffer.from(message.body), headers }] });
    },
    async close() {
      const opened = await connection.opened();
      await opened?.close().catch(() => undefined);
    },
  };
}

/** Another RocketMQ producer: the Node client, headers as user properties (text, one value a name). */
export function rocketmqForeign(endpoints: string): ClosableForeign {
  const connection = lazy(async () => {
    const producer = new RocketMQProducer({ endpoints, namespace: '' });
    await producer.startup();
    return producer;
  });
  return {
    headerTypes: ['text'],
    repeatedHeaders: false,
    async publish(topic: string, message: ForeignMessage) {
      const producer = await connection.get();
      const properties = new Map(message.headers.map(([name, value]) => [name, asText(value)]));
      await producer.send({ topic, body: Buffer.from(message.body), properties });
    },
    async close() {
      const opened = await connection.opened()?.catch(() => undefined);
      await opened?.shutdown().catch(() => undefined);
    },
  };
}
