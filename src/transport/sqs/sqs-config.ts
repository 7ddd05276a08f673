import type { SQSClient } from '@aws-sdk/client-sqs';
import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { toLogger, type Logger, type LoggerLike } from '../../core/logger.js';
import { SqsNames } from './sqs-names.js';

/** Input of `new SqsTransport(config)`: where SQS is, the queue kind, and timings. */
export interface SqsTransportConfig {
  /**
   * The SQS endpoint (an SQS-compatible server such as ElasticMQ: `http://127.0.0.1:9324`).
   * @default the AWS SDK's endpoint for `region`
   */
  readonly endpoint?: string;
  /** The AWS region. @default `AWS_REGION`, else 'us-east-1' */
  readonly region?: string;
  /** Credentials for the client. @default the AWS SDK's default provider chain */
  readonly credentials?: {
    /** The access key id. */
    readonly accessKeyId: string;
    /** The secret access key. */
    readonly secretAccessKey: string;
    /** The session token of temporary credentials. */
    readonly sessionToken?: string;
  };
  /** An `SQSClient` of the application's own, used instead of one made from the fields above (not destroyed on close). */
  readonly client?: SQSClient;
  /**
   * The application's namespace in the account: the first word of every queue name the transport
   * makes, so that two applications using topic `orders` and group `points` never share queues.
   * @default none
   */
  readonly namespace?: string;
  /**
   * Group queues are FIFO queues: `MessageGroupId` from the ordering key, `MessageDeduplicationId` from
   * the business key, and `subscribe(…, { ordering })` keeps per-key order. @default false
   */
  readonly fifo?: boolean;
  /** How long one `ReceiveMessage` waits for messages (long polling, at most 20 s). @default '20s' */
  readonly longPoll?: Duration;
  /**
   * How long each topic's log queue keeps what was published (SQS: 1 minute to 14 days): a group
   * subscribing for the first time with `from: 'earliest'` gets it. @default '4d'
   */
  readonly retention?: Duration;
  /** How long a delivery whose processor threw stays invisible before it comes again. @default '1s' */
  readonly failureBackoff?: Duration;
  /** Where the transport logs. @default the console logger */
  readonly logger?: LoggerLike;
}

/** The configuration, checked and with its defaults. */
export interface SqsSettings {
  readonly endpoint: string | undefined;
  readonly region: string;
  readonly credentials: SqsTransportConfig['credentials'];
  readonly client: SQSClient | undefined;
  readonly names: SqsNames;
  readonly fifo: boolean;
  readonly longPollSeconds: number;
  readonly retentionSeconds: number;
  readonly failureBackoffMs: number;
  readonly logger: Logger;
}

/** Longest SQS visibility timeout: 12 hours. */
export const SQS_MAX_VISIBILITY_SECONDS = 12 * 3600;

/** Checks `config` and fills in the defaults; a wrong value is a `ConfigError` naming its field. */
export function sqsSettings(config: SqsTransportConfig): SqsSettings {
  const longPollMs = parseDuration(config.longPoll ?? '20s', 'longPoll');
  if (longPollMs < 0 || longPollMs > 20_000) throw new ConfigError('longPoll', 'must be from 0 to 20s');
  const retentionMs = parseDuration(config.retention ?? '4d', 'retention');
  if (retentionMs < 60_000 || retentionMs > 14 * 86_400_000) {
    throw new ConfigError('retention', 'must be from 1m to 14d (SQS MessageRetentionPeriod)');
  }
  return {
    endpoint: config.endpoint,
    region: config.region ?? process.env.AWS_REGION ?? 'us-east-1',
    credentials: config.credentials,
    client: config.client,
    names: new SqsNames(config.namespace, config.fifo ?? false),
    fifo: config.fifo ?? false,
    longPollSeconds: Math.floor(longPollMs / 1000),
    retentionSeconds: Math.floor(retentionMs / 1000),
    failureBackoffMs: parseDuration(config.failureBackoff ?? '1s', 'failureBackoff'),
    logger: toLogger(config.logger),
  };
}
