import { randomBytes } from 'node:crypto';
import { CreateQueueCommand, ListQueuesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCTOR_SETTINGS, findingOf, statuses } from '../support/doctor.js';
import { findElasticMQ } from '../support/brokers.js';
import { brokerFindings, SqsNames, type BrokerTarget } from '../support/internal.js';
import { deleteQueues, sqsClient } from '../support/sqs.js';

const sqs = await findElasticMQ();

describe.skipIf(!sqs.available)('oncemq doctor: the SQS checks', () => {
  const client = sqsClient(sqs.url);
  const id = randomBytes(4).toString('hex');
  const bad = `dbad${id}`;
  const good = `dok${id}`;
  const target = (namespace: string, topic = 'orders'): BrokerTarget => ({
    transport: 'sqs',
    url: sqs.url,
    topic,
    prefix: namespace,
  });
  const settings = { ...DOCTOR_SETTINGS, group: 'points' };
  const create = async (name: string, attributes: Record<string, string>): Promise<void> => {
    await client.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  };

  beforeAll(async () => {
    const badNames = new SqsNames(bad, false);
    const goodNames = new SqsNames(good, false);
    await create(badNames.deadLetters('points'), { MessageRetentionPeriod: '60' });
    // Misconfigured: kept a minute, visible again after 5 s, redriven after 2 receives.
    await create(badNames.log('orders'), { MessageRetentionPeriod: '60' });
    await create(badNames.group('orders', 'points'), {
      MessageRetentionPeriod: '60',
      VisibilityTimeout: '5',
      RedrivePolicy: JSON.stringify({
        maxReceiveCount: 2,
        deadLetterTargetArn: `arn:aws:sqs:elasticmq:000000000000:${badNames.deadLetters('points')}`,
      }),
    });
    // Sound: as the transport creates them (14 days), with a visibility above the handler's minute.
    await create(goodNames.deadLetters('points'), { MessageRetentionPeriod: '1209600' });
    await create(goodNames.log('orders'), { MessageRetentionPeriod: '345600' });
    await create(goodNames.group('orders', 'points'), {
      MessageRetentionPeriod: '1209600',
      VisibilityTimeout: '120',
    });
  });

  afterAll(async () => {
    await deleteQueues(client, bad);
    await deleteQueues(client, good);
    client.destroy();
  });

  it('fails a redrive before the policy dead-letters, and skips the retention ElasticMQ does not report', async () => {
    const findings = await brokerFindings(target(bad), settings);
    // ElasticMQ keeps messages until deleted and reports no MessageRetentionPeriod (a unit test covers AWS's answer).
    expect(findingOf(findings, 'sqs.retention').status).toBe('skip');
    expect(findingOf(findings, 'sqs.redrive')).toMatchObject({
      status: 'fail',
      detail: { maxReceiveCount: 2, policyDeliveries: 4 },
    });
    expect(findingOf(findings, 'sqs.visibility-timeout')).toMatchObject({
      status: 'warn',
      detail: { timerMs: 5_000 },
    });
  });

  it('passes queues as the transport creates them', async () => {
    const findings = await brokerFindings(target(good), settings);
    expect(statuses(findings)).toEqual({
      'sqs.retention': 'skip',
      'sqs.visibility-timeout': 'ok',
      'sqs.redrive': 'ok',
      'sqs.dead-letter-queue': 'ok',
    });
  });

  it('fails queues that are not there, and creates nothing', async () => {
    const findings = await brokerFindings(target(good, 'absent'), settings);
    expect(findingOf(findings, 'sqs.log-queue').status).toBe('fail');
    expect(findingOf(findings, 'sqs.queue').status).toBe('fail');
    const listed = await client.send(
      new ListQueuesCommand({ QueueNamePrefix: new SqsNames(good, false).log('absent') }),
    );
    expect(listed.QueueUrls ?? []).toEqual([]);
  });

  it('skips, with the reason, when the endpoint cannot be reached', async () => {
    const findings = await brokerFindings({ ...target(good), url: 'http://127.0.0.1:1' }, settings);
    expect(findings.map(({ check, status }) => ({ check, status }))).toEqual([
      { check: 'sqs.reachable', status: 'skip' },
    ]);
  });
});
