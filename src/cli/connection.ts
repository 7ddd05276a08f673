/** The services the CLI, the benchmarks and the tests connect to. */
export type ServiceName = 'postgres' | 'mysql' | 'redis' | 'rabbitmq' | 'nats' | 'rocketmq' | 'kafka' | 'sqs';

export interface ServiceConnection {
  /** Environment variable that overrides the default URL. */
  readonly variable: string;
  /** This machine's loopback default. */
  readonly defaultUrl: string;
}

export const SERVICE_CONNECTIONS: Readonly<Record<ServiceName, ServiceConnection>> = Object.freeze({
  postgres: { variable: 'ONCEMQ_POSTGRES_URL', defaultUrl: 'postgres://postgres@127.0.0.1:5432/test' },
  mysql: { variable: 'ONCEMQ_MYSQL_URL', defaultUrl: 'mysql://root@127.0.0.1:3306/test' },
  redis: { variable: 'ONCEMQ_REDIS_URL', defaultUrl: 'redis://127.0.0.1:6379' },
  rabbitmq: { variable: 'ONCEMQ_RABBITMQ_URL', defaultUrl: 'amqp://guest:guest@127.0.0.1:5672' },
  nats: { variable: 'ONCEMQ_NATS_URL', defaultUrl: 'nats://127.0.0.1:4222' },
  rocketmq: { variable: 'ONCEMQ_ROCKETMQ_URL', defaultUrl: 'rocketmq://127.0.0.1:8081' },
  kafka: { variable: 'ONCEMQ_KAFKA_URL', defaultUrl: 'kafka://127.0.0.1:9092' },
  sqs: { variable: 'ONCEMQ_SQS_ENDPOINT', defaultUrl: 'http://127.0.0.1:9324' },
});

/** Where a resolved URL came from, for messages. */
export type UrlSource = 'flag' | 'environment' | 'default';

export interface ResolvedUrl {
  readonly url: string;
  readonly source: UrlSource;
}

/**
 * The URL of a service: the `--url` flag, else the service's environment variable
 * (`ONCEMQ_MYSQL_URL`), else the loopback default of this machine's services.
 */
export function resolveServiceUrl(
  service: ServiceName,
  flag?: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): ResolvedUrl {
  if (flag !== undefined && flag !== '') return { url: flag, source: 'flag' };
  const connection = SERVICE_CONNECTIONS[service];
  const fromEnv = env[connection.variable];
  if (fromEnv !== undefined && fromEnv !== '') return { url: fromEnv, source: 'environment' };
  return { url: connection.defaultUrl, source: 'default' };
}
