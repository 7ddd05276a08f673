import { errorText } from '../../core/errors.js';
import { redactUrl } from '../../core/unreachable.js';
import { DEFAULT_RABBIT_TRANSPORT_CONFIG } from '../../transport/rabbitmq/rabbitmq-config.js';
import { RabbitNames } from '../../transport/rabbitmq/rabbitmq-names.js';
import {
  absentFinding,
  brokerNeeds,
  duration,
  retentionFinding,
  shown,
  timerFinding,
  type BrokerNeeds,
} from './broker-thresholds.js';
import type { BrokerTarget, DoctorSettings, Finding } from './findings.js';

/** RabbitMQ's `consumer_timeout` when nothing sets it (node config, 30 minutes since 3.8.15). */
export const RABBIT_DEFAULT_CONSUMER_TIMEOUT_MS = 30 * 60_000;

/** The management plugin's port, where `--admin-url` points by default. */
export const RABBIT_MANAGEMENT_PORT = 15672;

/** A queue as the management API describes it (the fields the checks read). */
interface ManagedQueue {
  readonly name: string;
  readonly type?: string;
  readonly arguments?: Readonly<Record<string, unknown>>;
  readonly policy?: string | null;
  readonly operator_policy?: string | null;
  readonly effective_policy_definition?: Readonly<Record<string, unknown>> | null;
}

/** The management endpoint: `--admin-url`, else the broker's host on port 15672 with its credentials. */
export function rabbitAdminEndpoint(target: BrokerTarget): {
  base: string;
  authorization: string;
  vhost: string;
} {
  const broker = new URL(target.url ?? DEFAULT_RABBIT_TRANSPORT_CONFIG.url);
  const admin = new URL(target.adminUrl ?? `http://${broker.hostname}:${RABBIT_MANAGEMENT_PORT}`);
  const user = decodeURIComponent(admin.username || broker.username || 'guest');
  const password = decodeURIComponent(admin.password || broker.password || 'guest');
  const path = broker.pathname.replace(/^\//, '');
  admin.username = '';
  admin.password = '';
  return {
    base: admin.toString().replace(/\/$/, ''),
    authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
    vhost: path === '' ? '/' : decodeURIComponent(path),
  };
}

/** The queues a group of the deployment reads, checked through the management HTTP API. */
export async function rabbitFindings(target: BrokerTarget, settings: DoctorSettings): Promise<Finding[]> {
  const endpoint = rabbitAdminEndpoint(target);
  const get = async <T>(path: string): Promise<T | undefined> => {
    const response = await fetch(`${endpoint.base}/api/${path}`, {
      headers: { authorization: endpoint.authorization },
      signal: AbortSignal.timeout(5000),
    });
    if (response.status === 404) return undefined;
    if (!response.ok) throw new Error(`GET /api/${path} answered ${response.status} ${response.statusText}`);
    return (await response.json()) as T;
  };
  const vhost = encodeURIComponent(endpoint.vhost);
  let version: string;
  try {
    version = (await get<{ rabbitmq_version?: string }>('overview'))?.rabbitmq_version ?? '0';
  } catch (error) {
    return [
      {
        check: 'rabbitmq.management',
        status: 'skip',
        summary: `the management API at ${redactUrl(endpoint.base)} could not be read (${errorText(error)}): the queue settings are not checked`,
        fix: 'enable it on the broker (rabbitmq-plugins enable rabbitmq_management), or give --admin-url with a user that may read queues',
      },
    ];
  }
  const names = new RabbitNames(target.prefix ?? DEFAULT_RABBIT_TRANSPORT_CONFIG.prefix);
  const queue = (name: string): Promise<ManagedQueue | undefined> =>
    get<ManagedQueue>(`queues/${vhost}/${encodeURIComponent(name)}`);
  const needs = brokerNeeds(settings);
  const findings: Finding[] = [];
  if (target.topic !== undefined)
    findings.push(logFinding(names.log(target.topic), await queue(names.log(target.topic)), needs));
  if (settings.group === undefined) {
    findings.push({
      check: 'rabbitmq.queue',
      status: 'skip',
      summary: 'no --group given: the group\u2019s queues are not checked',
    });
    return findings;
  }
  const work = await queue(names.work(settings.group));
  if (work === undefined) {
    findings.push(
      absentFinding(
        'rabbitmq.queue',
        `work queue ${names.work(settings.group)}`,
        'start the group once with topology create, or check --group and the prefix',
      ),
    );
  } else {
    findings.push(...workQueueFindings(work, needs, consumerTimeoutReadable(version)));
  }
  const dead = await queue(names.dead(settings.group));
  if (dead === undefined) {
    findings.push(
      absentFinding(
        'rabbitmq.dead-letter-queue',
        `dead-letter queue ${names.dead(settings.group)}`,
        'start the group once with topology create',
      ),
    );
  } else {
    findings.push(typeFinding(dead, 'rabbitmq.dead-letter-queue-type'));
  }
  return findings;
}

/** A setting from the queue's own arguments (`x-<key>`), else from the policy in effect (`<key>`). */
function setting(queue: ManagedQueue, key: string): { value: unknown; source: string } | undefined {
  const argument = queue.arguments?.[`x-${key}`];
  if (argument !== undefined) return { value: argument, source: `argument x-${key}` };
  const policy = queue.effective_policy_definition?.[key];
  if (policy !== undefined) {
    return { value: policy, source: `policy ${queue.policy ?? queue.operator_policy ?? '?'}` };
  }
  return undefined;
}

/** Whether the server takes a queue's `x-consumer-timeout` and a `consumer-timeout` policy (3.12 on). */
function consumerTimeoutReadable(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 3 || (major === 3 && minor >= 12);
}

function workQueueFindings(queue: ManagedQueue, needs: BrokerNeeds, perQueueTimeout: boolean): Finding[] {
  const findings = [typeFinding(queue, 'rabbitmq.queue-type'), deliveryLimitFinding(queue, needs)];
  const deadLetterExchange = queue.effective_policy_definition?.['dead-letter-exchange'];
  if (deadLetterExchange !== undefined) {
    findings.push({
      check: 'rabbitmq.dead-letter-policy',
      status: 'warn',
      summary: `policy ${queue.policy ?? queue.operator_policy ?? '?'} gives work queue ${queue.name} dead-letter exchange '${shown(deadLetterExchange)}': what the broker drops goes there, not to oncemq's dead letters (no reason, not listed by oncemq dlq)`,
      fix: `exclude ${queue.name} from the policy's pattern; oncemq dead-letters itself`,
      detail: { queue: queue.name, deadLetterExchange },
    });
  }
  const ttl = setting(queue, 'message-ttl');
  if (ttl !== undefined) {
    findings.push(
      retentionFinding(
        'rabbitmq.message-ttl',
        `work queue ${queue.name} (${ttl.source})`,
        Number(ttl.value),
        needs,
        `remove the message TTL from ${queue.name}: an expired message is dropped before it is processed`,
        { queue: queue.name },
      ),
    );
  }
  const maxLength = setting(queue, 'max-length') ?? setting(queue, 'max-length-bytes');
  if (maxLength !== undefined) {
    const overflow = setting(queue, 'overflow')?.value ?? 'drop-head';
    findings.push({
      check: 'rabbitmq.max-length',
      status: overflow === 'drop-head' ? 'fail' : 'warn',
      summary:
        overflow === 'drop-head'
          ? `work queue ${queue.name} is limited (${maxLength.source} ${shown(maxLength.value)}) and drops its oldest messages when full: a backlog past it is lost`
          : `work queue ${queue.name} is limited (${maxLength.source} ${shown(maxLength.value)}, overflow ${shown(overflow)}): once full, publishes are refused`,
      fix: `remove the length limit from ${queue.name}`,
      detail: { queue: queue.name, maxLength: maxLength.value, overflow },
    });
  }
  findings.push(consumerTimeoutFinding(queue, needs, perQueueTimeout));
  return findings;
}

function typeFinding(queue: ManagedQueue, check: string): Finding {
  const type = queue.type ?? 'classic';
  if (type === 'quorum')
    return {
      check,
      status: 'ok',
      summary: `queue ${queue.name} is a quorum queue`,
      detail: { queue: queue.name, type },
    };
  return {
    check,
    status: 'warn',
    summary: `queue ${queue.name} is a ${type} queue: not replicated (a lost node loses its messages) and without at-least-once dead-lettering of its retry queues`,
    fix: "recreate it as a quorum queue (the transport's queueType: quorum, the default on 3.8+), after draining it",
    detail: { queue: queue.name, type },
  };
}

/**
 * The broker's delivery limit counts the returns of one copy (requeues, channel losses), not oncemq's
 * retries (each a new copy). Past it, a quorum queue drops the message, or moves it to a policy's
 * dead-letter exchange: never processed, never in oncemq's dead letters.
 */
function deliveryLimitFinding(queue: ManagedQueue, needs: BrokerNeeds): Finding {
  const limit = setting(queue, 'delivery-limit');
  const detail = { queue: queue.name, deliveryLimit: limit?.value, policyDeliveries: needs.deliveries };
  if (limit === undefined || Number(limit.value) < 0) {
    return {
      check: 'rabbitmq.delivery-limit',
      status: 'ok',
      summary: `work queue ${queue.name} has no delivery limit`,
      detail,
    };
  }
  const value = Number(limit.value);
  const deadLetterExchange = setting(queue, 'dead-letter-exchange');
  if (value < needs.deliveries || deadLetterExchange === undefined) {
    return {
      check: 'rabbitmq.delivery-limit',
      status: 'fail',
      summary:
        value < needs.deliveries
          ? `work queue ${queue.name} has delivery limit ${value} (${limit.source}), less than the policy's ${needs.deliveries} deliveries: the broker gives a failing message up before the policy dead-letters it`
          : `work queue ${queue.name} has delivery limit ${value} (${limit.source}) and no dead-letter exchange: a message returned that often (channel losses, busy keys) is dropped unprocessed`,
      fix: `remove the delivery limit from ${queue.name} (oncemq sets none; its retries are new copies)`,
      detail,
    };
  }
  return {
    check: 'rabbitmq.delivery-limit',
    status: 'warn',
    summary: `work queue ${queue.name} has delivery limit ${value} (${limit.source}): a copy returned that often goes to exchange '${shown(deadLetterExchange.value)}', not to oncemq's dead letters`,
    fix: `remove the delivery limit from ${queue.name}`,
    detail,
  };
}

/**
 * RabbitMQ closes the channel of a delivery unacked past `consumer_timeout`, and every unacked
 * delivery on it comes back: a handler longer than it never settles. The queue's `x-consumer-timeout`
 * or a `consumer-timeout` policy win where the server has them (3.12+; before, both are ignored); the node's own setting is not in the HTTP API, so
 * without them the default is assumed and said.
 */
function consumerTimeoutFinding(queue: ManagedQueue, needs: BrokerNeeds, perQueue: boolean): Finding {
  const own = perQueue ? setting(queue, 'consumer-timeout') : undefined;
  const timeoutMs = own === undefined ? RABBIT_DEFAULT_CONSUMER_TIMEOUT_MS : Number(own.value);
  const source =
    own?.source ?? 'the node default, assumed: the node\u2019s consumer_timeout is not readable over HTTP';
  return timerFinding(
    'rabbitmq.consumer-timeout',
    `the consumer timeout of ${queue.name} (${source})`,
    timeoutMs,
    needs,
    {
      status: 'fail',
      consequence:
        'the broker closes the channel while the handler runs, every unacked delivery on it comes again, and a handler that long never settles',
      fix: `raise consumer_timeout in rabbitmq.conf above the handler timeout (or, on 3.12+, a consumer-timeout policy on ${queue.name})`,
    },
    { queue: queue.name, source: own === undefined ? 'assumed-default' : own.source },
  );
}

/** The topic's log (a stream queue): what a new group starts from; absent when retention is off. */
function logFinding(name: string, queue: ManagedQueue | undefined, needs: BrokerNeeds): Finding {
  if (queue === undefined) {
    return {
      check: 'rabbitmq.topic-log',
      status: 'ok',
      summary: `no topic log ${name} (the transport's retention: false): a new group starts with what is published after it`,
    };
  }
  const maxAge = setting(queue, 'max-age')?.value;
  const maxAgeMs = typeof maxAge === 'string' ? parseMaxAge(maxAge) : undefined;
  return retentionFinding(
    'rabbitmq.topic-log',
    `topic log ${name}`,
    maxAgeMs,
    needs,
    `the transport's retention of at least ${duration(needs.keepMs)} (x-max-age of ${name})`,
    { queue: name, maxAge },
  );
}

const AGE_UNITS: Readonly<Record<string, number>> = {
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  D: 86_400_000,
  M: 2_592_000_000,
  Y: 31_536_000_000,
};

/** A stream's `x-max-age` (`7D`, `3600s`) in milliseconds; undefined when it is not one. */
function parseMaxAge(value: string): number | undefined {
  const match = /^(\d+)([smhDMY])$/.exec(value);
  return match === null ? undefined : Number(match[1]) * (AGE_UNITS[match[2] as string] ?? 0);
}
