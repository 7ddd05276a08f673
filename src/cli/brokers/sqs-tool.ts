import { ConfigError } from '../../core/errors.js';
import { SqsTransport } from '../../transport/sqs/sqs-transport.js';
import type { DeadLetters } from '../../transport/dead-letters.js';
import type { SqsTransportConfig } from '../../transport/sqs/sqs-config.js';

/**
 * The transport settings an SQS URL names: the endpoint (`http://127.0.0.1:9324`; `https://sqs.<region>.amazonaws.com`
 * for AWS), with `?namespace=`, `?region=` and `?fifo=true` as the application's transport has them.
 * Credentials come from the AWS SDK's provider chain; a local endpoint without `AWS_ACCESS_KEY_ID` gets
 * placeholder ones (ElasticMQ takes any).
 */
export function sqsConfigOfUrl(url: string): SqsTransportConfig {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError('url', `${url} is not an SQS endpoint URL (http://host:port)`);
  }
  const local = !parsed.hostname.endsWith('amazonaws.com');
  const namespace = parsed.searchParams.get('namespace') ?? undefined;
  const region = parsed.searchParams.get('region') ?? undefined;
  return {
    endpoint: `${parsed.protocol}//${parsed.host}`,
    ...(namespace === undefined ? {} : { namespace }),
    ...(region === undefined ? {} : { region }),
    fifo: parsed.searchParams.get('fifo') === 'true',
    ...(local && process.env.AWS_ACCESS_KEY_ID === undefined
      ? { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : {}),
  };
}

/**
 * The SQS transport for `oncemq dlq`, on the URL's settings ({@link sqsConfigOfUrl}). Listing creates
 * nothing: a missing dead-letter queue is an error.
 */
export function openSqsForTool(url: string): Promise<SqsTransport> {
  return Promise.resolve(new SqsTransport(sqsConfigOfUrl(url)));
}

/**
 * A queue that an SQS redrive policy fills, for `oncemq dlq --queue`: its messages as dead letters
 * (`SqsTransport.redriveDeadLetters`). Creates nothing; a queue that is not there is an error.
 */
export async function openSqsQueueForTool(
  url: string,
  queue: string,
): Promise<{ deadLetters: DeadLetters; close(): Promise<void> }> {
  const transport = await openSqsForTool(url);
  return { deadLetters: transport.redriveDeadLetters(queue), close: () => transport.close() };
}
