import { GetQueueAttributesCommand, GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { errorText } from '../../core/errors.js';
import { SqsNames } from '../../transport/sqs/sqs-names.js';
import { sqsConfigOfUrl } from '../brokers/sqs-tool.js';
import { resolveServiceUrl } from '../connection.js';
import {
  absentFinding,
  brokerNeeds,
  duration,
  retentionFinding,
  timerFinding,
  unreachableFinding,
  type BrokerNeeds,
} from './broker-thresholds.js';
import type { BrokerTarget, DoctorSettings, Finding } from './findings.js';

/** SQS's deduplication interval of FIFO queues: fixed, not a setting. */
export const SQS_FIFO_DEDUP_WINDOW_MS = 5 * 60_000;

type Attributes = Readonly<Record<string, string | undefined>>;

/** The queue a group reads on a topic, its log queue and its dead-letter queue, read with `GetQueueAttributes`. */
export async function sqsFindings(target: BrokerTarget, settings: DoctorSettings): Promise<Finding[]> {
  const url = resolveServiceUrl('sqs', target.url).url;
  const config = sqsConfigOfUrl(url);
  const client = new SQSClient({
    endpoint: config.endpoint,
    region: config.region ?? process.env.AWS_REGION ?? 'us-east-1',
    ...(config.credentials === undefined ? {} : { credentials: config.credentials }),
    maxAttempts: 2,
  });
  const fifo = config.fifo ?? false;
  const names = new SqsNames(target.prefix ?? config.namespace, fifo);
  const attributes = async (name: string): Promise<Attributes | undefined> => {
    try {
      const { QueueUrl } = await client.send(new GetQueueUrlCommand({ QueueName: name }));
      const answer = await client.send(
        new GetQueueAttributesCommand({
          QueueUrl,
          AttributeNames: ['All', 'MessageRetentionPeriod', 'RedrivePolicy'],
        }),
      );
      return answer.Attributes ?? {};
    } catch (error) {
      if (/NonExistentQueue|does not exist/i.test(`${(error as Error).name} ${errorText(error)}`))
        return undefined;
      throw error;
    }
  };
  try {
    const needs = brokerNeeds(settings);
    const findings: Finding[] = [];
    if (target.topic === undefined) {
      return [
        {
          check: 'sqs.queue',
          status: 'skip',
          summary: 'no --topic given: an SQS group queue is named by its topic and group',
        },
      ];
    }
    const log = await attributes(names.log(target.topic));
    if (log === undefined) {
      findings.push(
        absentFinding(
          'sqs.log-queue',
          `log queue ${names.log(target.topic)} (topic ${target.topic})`,
          'publish or subscribe once, or check --topic and ?namespace= of the URL',
        ),
      );
    }
    if (settings.group === undefined) {
      findings.push({
        check: 'sqs.queue',
        status: 'skip',
        summary: 'no --group given: the group queue is not checked',
      });
      return findings;
    }
    const name = names.group(target.topic, settings.group);
    const queue = await attributes(name);
    if (queue === undefined) {
      findings.push(
        absentFinding(
          'sqs.queue',
          `group queue ${name}`,
          'start the group once, or check --group and ?fifo= of the URL',
        ),
      );
    } else {
      findings.push(...groupQueueFindings(name, queue, needs));
    }
    const deadName = names.deadLetters(settings.group);
    const dead = await attributes(deadName);
    if (dead === undefined) {
      findings.push(
        absentFinding('sqs.dead-letter-queue', `dead-letter queue ${deadName}`, 'start the group once'),
      );
    } else {
      const retentionMs = Number(dead.MessageRetentionPeriod ?? 0) * 1000;
      findings.push(
        dead.MessageRetentionPeriod !== undefined && retentionMs < needs.replayMarginMs
          ? {
              check: 'sqs.dead-letter-queue',
              status: 'warn',
              summary: `dead-letter queue ${deadName} keeps messages ${duration(retentionMs)}, less than the replay margin ${duration(needs.replayMarginMs)}`,
              fix: `aws sqs set-queue-attributes --attributes MessageRetentionPeriod=1209600 on ${deadName}`,
              detail: { queue: deadName, retentionMs },
            }
          : {
              check: 'sqs.dead-letter-queue',
              status: 'ok',
              summary: `dead-letter queue ${deadName} keeps messages ${duration(retentionMs)}`,
              detail: { queue: deadName, retentionMs },
            },
      );
    }
    return findings;
  } catch (error) {
    return [
      unreachableFinding(
        'sqs',
        url,
        error,
        'start ElasticMQ (npm run brokers -- start elasticmq) or give --broker-url with the SQS endpoint',
      ),
    ];
  } finally {
    client.destroy();
  }
}

/** The checks of a group queue's attributes, as `GetQueueAttributes` answers them. */
export function groupQueueFindings(name: string, queue: Attributes, needs: BrokerNeeds): Finding[] {
  const detail = { queue: name };
  // A retry is the same message made invisible for its delay: the retention runs from its first send.
  const findings: Finding[] = [
    queue.MessageRetentionPeriod === undefined
      ? {
          check: 'sqs.retention',
          status: 'skip',
          summary: `the endpoint does not report the retention of ${name} (ElasticMQ keeps messages until deleted; AWS always reports it)`,
          detail,
        }
      : retentionFinding(
          'sqs.retention',
          `group queue ${name}`,
          Number(queue.MessageRetentionPeriod) * 1000,
          needs,
          `aws sqs set-queue-attributes --queue-url <url of ${name}> --attributes MessageRetentionPeriod=1209600 (14 days, the most)`,
          detail,
        ),
    timerFinding(
      'sqs.visibility-timeout',
      `the default visibility timeout of ${name}`,
      Number(queue.VisibilityTimeout ?? 30) * 1000,
      needs,
      {
        status: 'warn',
        consequence:
          'a receive that sets no visibility of its own (a Lambda event source, another consumer) makes the message visible again while the handler runs; oncemq\u2019s subscriptions set theirs and keep it alive',
        fix: `aws sqs set-queue-attributes --attributes VisibilityTimeout=<above the handler timeout> on ${name}`,
      },
      detail,
    ),
    redriveFinding(name, queue.RedrivePolicy, needs),
  ];
  if (queue.FifoQueue === 'true') {
    findings.push({
      check: 'sqs.fifo-dedup',
      status: 'ok',
      summary: `FIFO queue ${name} drops a repeated deduplication id for ${duration(SQS_FIFO_DEDUP_WINDOW_MS)} only (fixed by SQS): a publish resent later is stored again, and the ledger absorbs it`,
      detail: { ...detail, dedupWindowMs: SQS_FIFO_DEDUP_WINDOW_MS },
    });
  }
  return findings;
}

/**
 * A redrive policy moves a message received `maxReceiveCount` times to another queue. oncemq's
 * delayed retries are receives of the same message, so fewer receives than the policy's deliveries
 * take the message away before the policy dead-letters it (with no reason, and not in oncemq's DLQ).
 */
function redriveFinding(name: string, policy: string | undefined, needs: BrokerNeeds): Finding {
  if (policy === undefined || policy === '') {
    return {
      check: 'sqs.redrive',
      status: 'ok',
      summary: `group queue ${name} has no redrive policy (oncemq dead-letters itself)`,
      detail: { queue: name },
    };
  }
  let parsed: { maxReceiveCount?: unknown; deadLetterTargetArn?: unknown };
  try {
    parsed = JSON.parse(policy) as typeof parsed;
  } catch {
    return {
      check: 'sqs.redrive',
      status: 'warn',
      summary: `group queue ${name} has a redrive policy that is not JSON: ${policy}`,
      detail: { queue: name },
    };
  }
  const maxReceiveCount = Number(parsed.maxReceiveCount);
  const detail = {
    queue: name,
    maxReceiveCount,
    deadLetterTargetArn: parsed.deadLetterTargetArn,
    policyDeliveries: needs.deliveries,
  };
  if (maxReceiveCount < needs.deliveries) {
    return {
      check: 'sqs.redrive',
      status: 'fail',
      summary: `group queue ${name} redrives after ${maxReceiveCount} receives, fewer than the policy's ${needs.deliveries} deliveries: SQS moves a failing message away before the policy dead-letters it`,
      fix: `remove the redrive policy of ${name}, or raise maxReceiveCount to at least ${needs.deliveries + 3}`,
      detail,
    };
  }
  return {
    check: 'sqs.redrive',
    status: 'warn',
    summary: `group queue ${name} redrives after ${maxReceiveCount} receives (at least the policy's ${needs.deliveries}): messages received that often without an outcome go to ${String(parsed.deadLetterTargetArn)}, listed by oncemq dlq --queue only`,
    fix: `remove the redrive policy of ${name}; oncemq dead-letters itself`,
    detail,
  };
}
