import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCTOR_SETTINGS, findingOf, statuses } from '../support/doctor.js';
import { findKafka } from '../support/brokers.js';
import { brokerFindings, type BrokerTarget } from '../support/internal.js';
import { deleteTopics, kafkaAdmin } from '../support/kafka.js';

const kafka = await findKafka();

describe.skipIf(!kafka.available)('oncemq doctor: the Kafka checks', () => {
  const id = randomBytes(4).toString('hex');
  const bad = `dbad${id}`;
  const good = `dok${id}`;
  const target = (prefix: string, topic = `${prefix}-orders`): BrokerTarget => ({
    transport: 'kafka',
    url: kafka.url,
    topic,
    prefix,
  });
  const configs = (entries: Record<string, string>) =>
    Object.entries(entries).map(([name, value]) => ({ name, value }));

  beforeAll(async () => {
    const admin = kafkaAdmin(kafka.bootstrap);
    try {
      // Misconfigured: records kept a minute (and 1 MiB a partition), unclean elections, compaction;
      // dead letters kept a minute; the 5 min retry tier keeping its records a minute.
      await admin.createTopics({
        topics: [`${bad}-orders`],
        partitions: 1,
        replicas: 1,
        configs: configs({
          'retention.ms': '60000',
          'retention.bytes': '1048576',
          'unclean.leader.election.enable': 'true',
          'cleanup.policy': 'compact,delete',
        }),
      });
      await admin.createTopics({
        topics: [`${bad}.points.dlt`],
        partitions: 1,
        replicas: 1,
        configs: configs({ 'retention.ms': '60000' }),
      });
      await admin.createTopics({
        topics: [`${bad}.points.retry.300000`],
        partitions: 1,
        replicas: 1,
        configs: configs({ 'retention.ms': '60000' }),
      });
      // Sound: the broker's defaults, as the transport creates its topics.
      await admin.createTopics({
        topics: [`${good}-orders`, `${good}.points.dlt`, `${good}.points.retry.0`],
        partitions: 1,
        replicas: 1,
      });
    } finally {
      await admin.close();
    }
  });

  afterAll(async () => {
    await deleteTopics(kafka.bootstrap, [bad, good]);
  });

  it('fails a retention shorter than the horizon, unclean elections and a retry tier kept less than its delay', async () => {
    const findings = await brokerFindings(target(bad), { ...DOCTOR_SETTINGS, group: 'points' });
    expect(findingOf(findings, 'kafka.retention')).toMatchObject({
      status: 'fail',
      detail: { retentionMs: 60_000 },
    });
    expect(findingOf(findings, 'kafka.retention-bytes')).toMatchObject({
      status: 'warn',
      detail: { retentionBytes: 1_048_576 },
    });
    expect(findingOf(findings, 'kafka.unclean-leader-election').status).toBe('fail');
    expect(findingOf(findings, 'kafka.cleanup-policy').status).toBe('warn');
    expect(findingOf(findings, 'kafka.replication')).toMatchObject({
      status: 'warn',
      detail: { replicationFactor: 1 },
    });
    expect(findingOf(findings, 'kafka.dead-letter-topic')).toMatchObject({
      status: 'warn',
      detail: { retentionMs: 60_000 },
    });
    expect(findingOf(findings, 'kafka.retry-topic')).toMatchObject({
      status: 'fail',
      detail: { retentionMs: 60_000, delayMs: 300_000 },
    });
  });

  it("passes the broker's defaults, but for the single replica", async () => {
    const findings = await brokerFindings(target(good), { ...DOCTOR_SETTINGS, group: 'points' });
    expect(statuses(findings)).toEqual({
      'kafka.retention': 'ok',
      'kafka.unclean-leader-election': 'ok',
      'kafka.replication': 'warn',
      'kafka.dead-letter-topic': 'ok',
      'kafka.retry-topic': 'ok',
    });
  });

  it('fails a topic that is not there, and creates nothing', async () => {
    const findings = await brokerFindings(target(good, `${good}-absent`), DOCTOR_SETTINGS);
    const absent = findingOf(findings, 'kafka.topic');
    expect(absent.status).toBe('fail');
    expect(absent.summary).toContain('not there');
    const admin = kafkaAdmin(kafka.bootstrap);
    try {
      expect(await admin.listTopics()).not.toContain(`${good}-absent`);
    } finally {
      await admin.close();
    }
  });

  it('skips, with the reason, when no broker answers', async () => {
    const findings = await brokerFindings({ ...target(good), url: 'kafka://127.0.0.1:1' }, DOCTOR_SETTINGS);
    expect(findings.map(({ check, status }) => ({ check, status }))).toEqual([
      { check: 'kafka.reachable', status: 'skip' },
    ]);
  });
});
