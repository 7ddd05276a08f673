import { createHash } from 'node:crypto';
import { DeleteQueueCommand, ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { RunTransport } from '../run-transports.js';
import { SqsTransport } from '../../transport/sqs/sqs-transport.js';
import { SILENT_LOGGER } from '../../core/logger.js';
import { sqsConfigOfUrl } from './sqs-tool.js';

/**
 * The SQS namespace of a run: queue names keep only the first 12 characters of a namespace, and the
 * runs' names share more than that (`oncemq_chaos_…`), so a run takes 12 of its own, derived from its
 * name; its queues, and only its, start with them and `_`.
 */
const sqsNamespace = (namespace: string): string =>
  `r${createHash('sha256').update(namespace, 'utf8').digest('hex').slice(0, 11)}`;

/**
 * Amazon SQS (ElasticMQ) for `oncemq demo` and `oncemq chaos`: every queue under the run's namespace,
 * FIFO group queues for a run in per-key order, a 1 s long poll and a short failure backoff so that a
 * cut connection or a killed member costs little. The run's URL is the endpoint, through the run's TCP
 * proxy for the consumers: the transport sends every call to its endpoint (never to the host of the
 * queue URLs the server answers), so a cut meets every call in flight, long polls included.
 */
export const SQS_RUN_TRANSPORT = Object.freeze<RunTransport>({
  service: 'sqs',
  open: ({ url, namespace, ordered }) =>
    Promise.resolve(
      new SqsTransport({
        ...sqsConfigOfUrl(url),
        namespace: sqsNamespace(namespace),
        fifo: ordered === true,
        longPoll: '1s',
        failureBackoff: '200ms',
        // A run cuts connections on purpose: their lines would drown its summary.
        logger: SILENT_LOGGER,
      }),
    ),
  cleanup: async ({ url, namespace }) => {
    const { endpoint, region, credentials } = sqsConfigOfUrl(url);
    const client = new SQSClient({
      region: region ?? process.env.AWS_REGION ?? 'us-east-1',
      ...(endpoint === undefined ? {} : { endpoint }),
      ...(credentials === undefined ? {} : { credentials: { ...credentials } }),
    });
    try {
      let next: string | undefined;
      const urls: string[] = [];
      do {
        const page = await client.send(
          new ListQueuesCommand({
            QueueNamePrefix: `${sqsNamespace(namespace)}_`,
            MaxResults: 1000,
            NextToken: next,
          }),
        );
        urls.push(...(page.QueueUrls ?? []));
        next = page.NextToken;
      } while (next !== undefined);
      for (const queueUrl of urls) await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
    } finally {
      client.destroy();
    }
  },
});
