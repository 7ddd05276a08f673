import { randomBytes } from 'node:crypto';
import amqplib from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCTOR_SETTINGS, findingOf, statuses } from '../support/doctor.js';
import { brokerFindings, type BrokerTarget } from '../support/internal.js';
import { waitUntil } from '../support/local-points.js';
import { deleteTopology, findRabbit } from '../support/rabbitmq.js';
import { findService } from '../support/services.js';

const service = await findRabbit();
// The checks read the management API (rabbitmq_management, enabled by .ci/run).
const management = service.available
  ? await findService({ variable: 'ONCEMQ_RABBITMQ_ADMIN_URL', defaultUrl: 'http://127.0.0.1:15672' })
  : service;

const adminUrl = process.env.ONCEMQ_RABBITMQ_ADMIN_URL ?? 'http://127.0.0.1:15672';

/** A request to the management API with the broker's credentials (policies are not AMQP). */
async function managementRequest(method: string, path: string, body?: unknown): Promise<unknown> {
  const broker = new URL(service.url);
  const authorization = `Basic ${Buffer.from(`${decodeURIComponent(broker.username || 'guest')}:${decodeURIComponent(broker.password || 'guest')}`).toString('base64')}`;
  const response = await fetch(`${adminUrl}/api/${path}`, {
    method,
    headers: { authorization, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok && response.status !== 404) throw new Error(`${method} ${path}: ${response.status}`);
  return method === 'GET' && response.ok ? response.json() : undefined;
}

describe.skipIf(!management.available)('oncemq doctor: the RabbitMQ checks', () => {
  const id = randomBytes(4).toString('hex');
  const bad = `dbad${id}`;
  const good = `dok${id}`;
  const stolen = `dpol${id}`;
  const limited = `dlim${id}`;
  const queues = [
    `${bad}.points`,
    `${bad}.points@dead`,
    `${bad}@log.orders`,
    `${good}.points`,
    `${good}.points@dead`,
    `${stolen}.points`,
    `${stolen}.points@dead`,
    `${limited}.points`,
  ];
  const target = (prefix: string): BrokerTarget => ({
    transport: 'rabbitmq',
    url: service.url,
    adminUrl,
    topic: 'orders',
    prefix,
  });

  beforeAll(async () => {
    const connection = await amqplib.connect(service.url);
    const channel = await connection.createChannel();
    const quorum = { 'x-queue-type': 'quorum' };
    // Misconfigured: a delivery limit of 2 without a dead-letter exchange, a 1 min TTL, 1000 messages
    // then the oldest dropped; a classic dead-letter queue; a topic log kept a minute.
    await channel.assertQueue(`${bad}.points`, {
      durable: true,
      arguments: { ...quorum, 'x-delivery-limit': 2, 'x-message-ttl': 60_000, 'x-max-length': 1000 },
    });
    await channel.assertQueue(`${bad}.points@dead`, { durable: true });
    await channel.assertQueue(`${bad}@log.orders`, {
      durable: true,
      arguments: { 'x-queue-type': 'stream', 'x-max-age': '60s' },
    });
    // Sound: quorum queues as the transport declares them.
    await channel.assertQueue(`${good}.points`, { durable: true, arguments: quorum });
    await channel.assertQueue(`${good}.points@dead`, { durable: true, arguments: quorum });
    // A policy of the operator's that dead-letters what the broker gives up on elsewhere.
    await channel.assertQueue(`${stolen}.points`, { durable: true, arguments: quorum });
    await channel.assertQueue(`${stolen}.points@dead`, { durable: true, arguments: quorum });
    // A delivery limit under the policy's 4 deliveries, even with somewhere to dead-letter to.
    await channel.assertQueue(`${limited}.points`, {
      durable: true,
      arguments: { ...quorum, 'x-delivery-limit': 2, 'x-dead-letter-exchange': 'elsewhere' },
    });
    await connection.close();
    await managementRequest('PUT', `policies/%2F/${stolen}`, {
      pattern: `^${stolen}\\.points$`,
      'apply-to': 'queues',
      definition: { 'dead-letter-exchange': 'elsewhere', 'delivery-limit': 5 },
    });
    // The management API shows a queue's policy once its next statistics arrive (every few seconds).
    await waitUntil(
      async () => {
        const queue = (await managementRequest('GET', `queues/%2F/${stolen}.points`)) as
          { policy?: string } | undefined;
        return queue?.policy === stolen;
      },
      `policy ${stolen} shown on its queue`,
      60_000,
    );
  });

  afterAll(async () => {
    await managementRequest('DELETE', `policies/%2F/${stolen}`);
    await deleteTopology(service.url, { queues, exchanges: [] });
  });

  it('fails a delivery limit that drops messages, a TTL and a length limit, and warns of a classic queue', async () => {
    const findings = await brokerFindings(target(bad), { ...DOCTOR_SETTINGS, group: 'points' });
    expect(findingOf(findings, 'rabbitmq.delivery-limit')).toMatchObject({
      status: 'fail',
      detail: { deliveryLimit: 2, policyDeliveries: 4 },
    });
    expect(findingOf(findings, 'rabbitmq.message-ttl')).toMatchObject({
      status: 'fail',
      detail: { retentionMs: 60_000 },
    });
    expect(findingOf(findings, 'rabbitmq.max-length')).toMatchObject({
      status: 'fail',
      detail: { overflow: 'drop-head' },
    });
    expect(findingOf(findings, 'rabbitmq.queue-type').status).toBe('ok');
    expect(findingOf(findings, 'rabbitmq.dead-letter-queue-type')).toMatchObject({
      status: 'warn',
      detail: { type: 'classic' },
    });
    expect(findingOf(findings, 'rabbitmq.topic-log')).toMatchObject({
      status: 'fail',
      detail: { retentionMs: 60_000 },
    });
  });

  it("fails a delivery limit under the policy's deliveries even with a dead-letter exchange", async () => {
    const findings = await brokerFindings(target(limited), { ...DOCTOR_SETTINGS, group: 'points' });
    expect(findingOf(findings, 'rabbitmq.delivery-limit')).toMatchObject({
      status: 'fail',
      detail: { deliveryLimit: 2, policyDeliveries: 4 },
    });
  });

  it('fails a handler longer than the consumer timeout (the node default, said to be assumed)', async () => {
    const findings = await brokerFindings(target(good), {
      ...DOCTOR_SETTINGS,
      group: 'points',
      handlerTimeoutMs: 3_600_000,
    });
    expect(findingOf(findings, 'rabbitmq.consumer-timeout')).toMatchObject({
      status: 'fail',
      detail: { timerMs: 1_800_000, runMs: 3_600_000, source: 'assumed-default' },
    });
  });

  it("warns of a policy's dead-letter exchange and delivery limit that take messages past oncemq's dead letters", async () => {
    const findings = await brokerFindings(target(stolen), { ...DOCTOR_SETTINGS, group: 'points' });
    expect(findingOf(findings, 'rabbitmq.dead-letter-policy')).toMatchObject({
      status: 'warn',
      detail: { deadLetterExchange: 'elsewhere' },
    });
    expect(findingOf(findings, 'rabbitmq.delivery-limit')).toMatchObject({
      status: 'warn',
      detail: { deliveryLimit: 5 },
    });
  });

  it('passes quorum queues as the transport declares them', async () => {
    const findings = await brokerFindings(target(good), { ...DOCTOR_SETTINGS, group: 'points' });
    expect(statuses(findings)).toEqual({
      'rabbitmq.topic-log': 'ok',
      'rabbitmq.queue-type': 'ok',
      'rabbitmq.delivery-limit': 'ok',
      'rabbitmq.consumer-timeout': 'ok',
      'rabbitmq.dead-letter-queue-type': 'ok',
    });
  });

  it('fails a work queue that is not there, and creates nothing', async () => {
    const findings = await brokerFindings(target(good), { ...DOCTOR_SETTINGS, group: 'absent' });
    const absent = findingOf(findings, 'rabbitmq.queue');
    expect(absent.status).toBe('fail');
    expect(absent.summary).toContain('not there');
    const connection = await amqplib.connect(service.url);
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await expect(channel.checkQueue(`${good}.absent`)).rejects.toThrow(/NOT_FOUND/);
    await connection.close().catch(() => undefined);
  });

  it('skips, saying how to enable it, when the management API cannot be reached', async () => {
    const findings = await brokerFindings(
      { ...target(good), adminUrl: 'http://127.0.0.1:1' },
      { ...DOCTOR_SETTINGS, group: 'points' },
    );
    expect(findings.map(({ check, status }) => ({ check, status }))).toEqual([
      { check: 'rabbitmq.management', status: 'skip' },
    ]);
    expect(findings[0]?.fix).toContain('rabbitmq-plugins enable rabbitmq_management');
  });
});
