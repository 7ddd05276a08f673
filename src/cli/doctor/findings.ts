import type { RetryPolicy } from '../../core/retry-policy.js';

/**
 * What one check of `oncemq doctor` found. `fail` breaks a promise or will (a retention shorter than
 * the redelivery horizon, a Redis ledger that may be evicted); `warn` costs something or may break it
 * under a failure (a lease longer than the broker's ack wait); `skip` could not be checked, with why.
 */
export type FindingStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface Finding {
  /** Stable id of the check, `area.name`: `ledger.retention`, `rabbitmq.consumer-timeout`. */
  readonly check: string;
  readonly status: FindingStatus;
  /** One line: what was found, with the figures it compared. */
  readonly summary: string;
  /** What to change, when the status is `warn` or `fail`. */
  readonly fix?: string;
  /** The figures read, for `--json`. */
  readonly detail?: Readonly<Record<string, unknown>>;
}

/** The deployment's settings that the checks compare what they read against (from the command line). */
export interface DoctorSettings {
  /** The consumers' retry policy, whose horizon the ledger and the broker must outlast. */
  readonly retry: RetryPolicy;
  /** Added to the retry horizon for dead-letter replays (`--replay-margin`, default 1 day). */
  readonly replayMarginMs: number;
  /** The ledger retention the app runs `startRetention` with (`--retention`); undefined: the ledger's default. */
  readonly retentionMs?: number | undefined;
  /** The lease of a leased pipeline (`--lease`); undefined: transactional mode only. */
  readonly leaseMs?: number | undefined;
  /** The handler's longest expected run (`--handler-timeout`); undefined: not given. */
  readonly handlerTimeoutMs?: number | undefined;
  /** The consumer group (`--group`). */
  readonly group?: string | undefined;
}

/** Where the broker of the deployment is and what the consumers read (`--transport`, `--url`, `--topic`, `--group`). */
export interface BrokerTarget {
  readonly transport: string;
  readonly url?: string | undefined;
  /** The topic, stream or queue the consumers read (`--topic`). */
  readonly topic?: string | undefined;
  /** A management endpoint where the broker has one apart from its client port (`--admin-url`). */
  readonly adminUrl?: string | undefined;
  /**
   * The transport's name prefix when it is not the default: NATS `streamPrefix`, RabbitMQ and Kafka
   * `prefix`, Redis Streams key `prefix`, SQS `namespace`. Undefined: each transport's default.
   */
  readonly prefix?: string | undefined;
}

/** Exit code of `oncemq doctor`: 1 when any finding failed, 0 otherwise (warnings alone exit 0). */
export function doctorExitCode(findings: readonly Finding[]): number {
  return findings.some((finding) => finding.status === 'fail') ? 1 : 0;
}
