import type {
  Admin,
  ConsumeOptions,
  Consumer,
  ConsumerOptions,
  MessagesStream,
  Producer,
  ProducerOptions,
} from '@platformatic/kafka';
import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { redactUrl, unreachableCause, unreachableMessage } from '../../core/unreachable.js';
import type { KafkaBrokerAddress, KafkaSettings } from './kafka-config.js';

const INSTALL = 'npm install @platformatic/kafka@1';

/** The classes oncemq takes from `@platformatic/kafka`. */
export interface KafkaDriver {
  readonly Producer: typeof Producer;
  readonly Consumer: typeof Consumer;
  readonly Admin: typeof Admin;
}

/** Loads `@platformatic/kafka` when a Kafka transport opens (oncemq itself loads no driver). */
export async function loadKafkaDriver(): Promise<KafkaDriver> {
  try {
    const kafka = await import('@platformatic/kafka');
    return { Producer: kafka.Producer, Consumer: kafka.Consumer, Admin: kafka.Admin };
  } catch (error) {
    throw new ConfigError('url', `the Kafka transport needs the Kafka client package (${INSTALL})`, {
      cause: error,
    });
  }
}

/** The part of the client's connection pool that picks where to dial. */
interface PoolLike {
  get(broker: KafkaBrokerAddress, callback: unknown): unknown;
  getFirstAvailable(brokers: readonly KafkaBrokerAddress[], callback: unknown): unknown;
}

function symbolNamed(target: object, description: string): symbol | undefined {
  for (
    let proto: object | null = target;
    proto !== null;
    proto = Object.getPrototypeOf(proto) as object | null
  ) {
    const found = Object.getOwnPropertySymbols(proto).find((symbol) => symbol.description === description);
    if (found !== undefined) return found;
  }
  return undefined;
}

function mapPool(pool: PoolLike, map: (broker: KafkaBrokerAddress) => KafkaBrokerAddress): PoolLike {
  const get = pool.get.bind(pool);
  const getFirstAvailable = pool.getFirstAvailable.bind(pool);
  pool.get = (broker, callback) => get(map(broker), callback);
  pool.getFirstAvailable = (brokers, callback) => getFirstAvailable(brokers.map(map), callback);
  return pool;
}

/**
 * Makes every connection of `client` (its own pool, and the pools its message streams create) dial
 * the mapped address of a broker: `@platformatic/kafka` has no option for it, so its connection pools
 * are wrapped where the client creates them.
 */
function dialMapped<T extends object>(client: T, addresses: ReadonlyMap<string, KafkaBrokerAddress>): T {
  if (addresses.size === 0) return client;
  const map = (broker: KafkaBrokerAddress): KafkaBrokerAddress =>
    addresses.get(`${broker.host}:${broker.port}`) ?? broker;
  const connections = symbolNamed(client, 'plt.kafka.base.connections');
  const create = symbolNamed(client, 'plt.kafka.base.createConnectionPool');
  const record = client as unknown as Record<symbol, unknown>;
  const createPool = create === undefined ? undefined : record[create];
  if (connections === undefined || create === undefined || typeof createPool !== 'function') {
    throw new ConfigError(
      'brokerAddresses',
      'this version of @platformatic/kafka does not let oncemq choose where to dial; remove brokerAddresses',
    );
  }
  mapPool(record[connections] as PoolLike, map);
  record[create] = (context: unknown): PoolLike =>
    mapPool((createPool as (context: unknown) => PoolLike).call(client, context), map);
  return client;
}

function base(settings: KafkaSettings): {
  clientId: string;
  bootstrapBrokers: string[];
  timeout: number;
  requestTimeout: number;
  retries: number;
  retryDelay: number;
} {
  const bootstrap = settings.brokers.map((broker) => {
    const dial = settings.brokerAddresses.get(`${broker.host}:${broker.port}`) ?? broker;
    return `${dial.host}:${dial.port}`;
  });
  return {
    clientId: settings.clientId,
    bootstrapBrokers: bootstrap,
    timeout: settings.timeoutMs,
    requestTimeout: settings.timeoutMs,
    retries: 10,
    retryDelay: 250,
  };
}

/** The idempotent producer: acks from every in-sync replica, one session's resends dropped by the broker. */
export function createProducer(driver: KafkaDriver, settings: KafkaSettings): Producer {
  const options: ProducerOptions<Buffer, Buffer, Buffer, Buffer> = {
    ...base(settings),
    idempotent: true,
    acks: -1,
    autocreateTopics: false,
  };
  return dialMapped(new driver.Producer(options), settings.brokerAddresses);
}

/** A group member's consumer; offsets are committed by oncemq only. */
export function createConsumer(
  driver: KafkaDriver,
  settings: KafkaSettings,
  groupId: string,
  instanceId?: string,
): Consumer {
  const options: ConsumerOptions<Buffer, Buffer, Buffer, Buffer> = {
    ...base(settings),
    groupId,
    autocommit: false,
    sessionTimeout: settings.sessionTimeoutMs,
    heartbeatInterval: settings.heartbeatMs,
    rebalanceTimeout: Math.max(settings.sessionTimeoutMs, 30_000),
    maxWaitTime: 200,
    ...(instanceId === undefined ? {} : { groupInstanceId: instanceId }),
  };
  return dialMapped(new driver.Consumer(options), settings.brokerAddresses);
}

/** A consumer's stream of records, keys, values and headers as bytes. */
export type RecordStream = MessagesStream<Buffer, Buffer, Buffer, Buffer>;

/**
 * Opens a message stream with `onError` listening from the turn the client hands the stream over.
 * The client starts a stream on the next tick, before an awaited promise resumes its caller: a
 * stream that fails at once (its consumer closed meanwhile) would emit 'error' to no listener and
 * end the process. The callback form hands the stream over in the same turn it is made.
 */
export function openRecordStream(
  consumer: Consumer,
  options: ConsumeOptions<Buffer, Buffer, Buffer, Buffer>,
  onError: (stream: RecordStream, error: Error) => void,
): Promise<RecordStream> {
  return new Promise((resolve, reject) => {
    consumer.consume(options, (error, stream) => {
      if (error !== null || stream === undefined) {
        reject(error ?? new Error('kafka: the client opened no message stream'));
        return;
      }
      stream.on('error', (streamError: Error) => onError(stream, streamError));
      resolve(stream);
    });
  });
}

/** The admin client: topics are listed and created through it. */
export function createAdmin(driver: KafkaDriver, settings: KafkaSettings): Admin {
  return dialMapped(new driver.Admin(base(settings)), settings.brokerAddresses);
}

/** What to do when no Kafka broker can be reached. */
export const KAFKA_UNREACHABLE_HINT =
  'start one there (npm run brokers -- start kafka, in an oncemq checkout)';

/** The bootstrap brokers as the `kafka://` URL a message names. */
export function kafkaUrl(settings: Pick<KafkaSettings, 'brokers'>): string {
  return `kafka://${settings.brokers.map(({ host, port }) => `${host}:${port}`).join(',')}`;
}

const NO_ANSWER = Symbol('no answer');

/**
 * The first request to the brokers (`url`), bounded by `timeoutMs`: brokers that cannot be reached fail
 * it with one {@link TransportUnavailableError} naming the URL and what to run, instead of the
 * client's `MultipleErrors` of every retry. The client itself tries a request 11 times 250 ms apart
 * (about 2.5 s when nothing listens on the port); an address that does not answer at all is given up
 * after `timeoutMs`. Close the client when it fails: that stops its retries.
 */
export async function firstContact<T>(url: string, timeoutMs: number, request: Promise<T>): Promise<T> {
  const unreachable = (detail: string, cause?: unknown): TransportUnavailableError =>
    new TransportUnavailableError(
      unreachableMessage({ server: 'Kafka', url, detail, hint: KAFKA_UNREACHABLE_HINT }),
      cause === undefined ? undefined : { cause },
    );
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof NO_ANSWER>((resolve) => {
    timer = setTimeout(() => resolve(NO_ANSWER), timeoutMs);
  });
  try {
    const answer = await Promise.race([request, late]);
    if (answer === NO_ANSWER) throw unreachable(`no answer within ${timeoutMs} ms`);
    return answer;
  } catch (error) {
    if (error instanceof TransportUnavailableError) throw error;
    const down = unreachableCause(error);
    if (down !== undefined) throw unreachable(down.message, error);
    throw new TransportUnavailableError(
      `kafka: the brokers at ${redactUrl(url)} refused the first request: ${errorText(error)}`,
      { cause: error },
    );
  } finally {
    clearTimeout(timer);
    request.catch(() => undefined);
  }
}
