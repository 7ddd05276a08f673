import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { DOCTOR_SETTINGS, findingOf, statuses } from '../support/doctor.js';
import { brokerFindings, type BrokerTarget } from '../support/internal.js';
import { deleteStreams, directConnection, NATS_SERVICE } from '../support/nats.js';
import { findService } from '../support/services.js';

const service = await findService(NATS_SERVICE);
const NS = 1_000_000;

describe.skipIf(!service.available)('oncemq doctor: the NATS JetStream checks', () => {
  const id = randomUUID().slice(0, 8);
  /** A misconfigured deployment and a sound one, each under a stream prefix of its own. */
  const bad = `DBAD${id}`;
  const good = `DOK${id}`;
  let connection: NatsConnection;
  let jsm: JetStreamManager;
  const target = (prefix: string, topic = 'orders'): BrokerTarget => ({
    transport: 'nats',
    url: service.url,
    topic,
    prefix,
  });

  beforeAll(async () => {
    connection = await directConnection(service.url);
    jsm = await jetstreamManager(connection);
    // Misconfigured: kept a minute, a 10 s duplicate window, 100 messages then the oldest dropped; a
    // consumer that stops after 2 deliveries with a 5 s ack wait; retries kept a minute; dead letters too.
    await jsm.streams.add({
      name: `${bad}_orders`,
      subjects: [`dbad${id}.orders.>`],
      max_age: 60_000 * NS,
      duplicate_window: 10_000 * NS,
      max_msgs: 100,
      discard: 'old',
    });
    await jsm.consumers.add(`${bad}_orders`, {
      durable_name: 'points',
      ack_policy: 'explicit',
      max_deliver: 2,
      ack_wait: 5_000 * NS,
    });
    await jsm.streams.add({
      name: `${bad}-RETRY`,
      subjects: [`dbad${id}-retry.>`],
      retention: 'workqueue',
      max_age: 60_000 * NS,
    });
    await jsm.streams.add({ name: `${bad}-DLQ`, subjects: [`dbad${id}-dlq.>`], max_age: 60_000 * NS });
    // Sound: as the transport creates them, with an ack wait above the handler's minute.
    await jsm.streams.add({
      name: `${good}_orders`,
      subjects: [`dok${id}.orders.>`],
      duplicate_window: 120_000 * NS,
    });
    await jsm.consumers.add(`${good}_orders`, {
      durable_name: 'points',
      ack_policy: 'explicit',
      max_deliver: 67,
      ack_wait: 120_000 * NS,
    });
    await jsm.streams.add({ name: `${good}-RETRY`, subjects: [`dok${id}-retry.>`], retention: 'workqueue' });
    await jsm.consumers.add(`${good}-RETRY`, {
      durable_name: 'points',
      ack_policy: 'explicit',
      max_deliver: 67,
      ack_wait: 120_000 * NS,
      filter_subject: `dok${id}-retry.points`,
    });
    await jsm.streams.add({ name: `${good}-DLQ`, subjects: [`dok${id}-dlq.>`] });
  });

  afterAll(async () => {
    await deleteStreams(service.url, bad);
    await deleteStreams(service.url, good);
    await connection.close();
  });

  it('fails a stream kept shorter than the horizon and a consumer that stops before the policy dead-letters', async () => {
    const findings = await brokerFindings(target(bad), { ...DOCTOR_SETTINGS, group: 'points' });
    expect(findingOf(findings, 'nats.max-age')).toMatchObject({
      status: 'fail',
      detail: { retentionMs: 60_000 },
    });
    expect(findingOf(findings, 'nats.max-deliver')).toMatchObject({
      status: 'fail',
      detail: { maxDeliver: 2, policyDeliveries: 4 },
    });
    expect(findingOf(findings, 'nats.ack-wait')).toMatchObject({
      status: 'warn',
      detail: { timerMs: 5_000, runMs: 60_000 },
    });
    expect(findingOf(findings, 'nats.duplicate-window')).toMatchObject({
      status: 'warn',
      detail: { duplicateWindowMs: 10_000 },
    });
    expect(findingOf(findings, 'nats.limits')).toMatchObject({
      status: 'warn',
      detail: { maxMsgs: 100, discard: 'old' },
    });
    expect(findingOf(findings, 'nats.replicas').status).toBe('warn');
    // Retry copies wait up to 5 min in a stream that keeps them one.
    expect(findingOf(findings, 'nats.retry-stream')).toMatchObject({
      status: 'fail',
      detail: { maxAgeMs: 60_000, longestDelayMs: 300_000 },
    });
    expect(findingOf(findings, 'nats.dead-letter-stream').status).toBe('warn');
    // The group has no consumer on the retry stream.
    expect(findingOf(findings, 'nats.consumer.retry').status).toBe('fail');
  });

  it('passes what the transport creates, on every check but the single replica', async () => {
    const findings = await brokerFindings(target(good), { ...DOCTOR_SETTINGS, group: 'points' });
    expect(statuses(findings)).toEqual({
      'nats.max-age': 'ok',
      'nats.duplicate-window': 'ok',
      'nats.replicas': 'warn',
      'nats.limits': 'ok',
      'nats.max-deliver': 'ok',
      'nats.ack-wait': 'ok',
      'nats.retry-stream': 'ok',
      'nats.max-deliver.retry': 'ok',
      'nats.ack-wait.retry': 'ok',
      'nats.dead-letter-stream': 'ok',
    });
  });

  it('fails a topic stream that is not there, and creates nothing', async () => {
    const findings = await brokerFindings(target(good, 'missing'), { ...DOCTOR_SETTINGS, group: 'points' });
    const absent = findingOf(findings, 'nats.stream');
    expect(absent.status).toBe('fail');
    expect(absent.summary).toContain('not there');
    await expect(jsm.streams.info(`${good}_missing`)).rejects.toThrow();
  });

  it('skips, with the reason, when the server cannot be reached', async () => {
    const findings = await brokerFindings({ ...target(good), url: 'nats://127.0.0.1:1' }, DOCTOR_SETTINGS);
    expect(findings).toEqual([expect.objectContaining({ check: 'nats.reachable', status: 'skip' })]);
  });
});
