// One trace from publish to effect: oncemq's producer starts a PRODUCER span and carries its context
// in the message headers; the consumer's pipeline continues it with a CONSUMER span whose parent is
// the producer's span. Through the local broker, RabbitMQ and NATS JetStream, with the tracing SDK's
// in-memory exporter.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPipeline, METRICS, PermanentError, type Envelope, type Transport } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { findService } from '../support/services.js';
import { testBroker, waitUntil } from '../support/local-points.js';
import { NATS_SERVICE, natsUnderTest } from '../support/nats.js';
import { findRabbit, rabbitWorld } from '../support/rabbitmq.js';
import { MetricsProbe, SpanProbe, StorageContextManager } from '../support/telemetry.js';

const rabbit = await findRabbit();
const nats = await findService(NATS_SERVICE);

interface Bed {
  readonly transport: Transport;
}

const probe = new SpanProbe();
let dir: string;

beforeAll(() => {
  probe.registerGlobally();
  dir = mkdtempSync(join(tmpdir(), 'oncemq-traces-'));
});

afterAll(async () => {
  await probe.shutdown();
  rmSync(dir, { recursive: true, force: true });
});

const spansOf = (traceId: string): ReadableSpan[] =>
  probe.spans().filter((span) => span.spanContext().traceId === traceId);

/**
 * Publishes one event and runs it through a pipeline subscribed on `bed`; returns the producer span,
 * the consumer span and the headers the handler's envelope carried.
 */
async function publishToEffect(bed: Bed, topic: string, key: string) {
  const db = new Database(':memory:');
  const ledger = new SqliteLedger({ database: db });
  await ledger.init();
  const seen: Envelope[] = [];
  const pipeline = createPipeline<Database.Database, { n: number }>({
    ledger,
    group: 'effects',
    telemetry: { system: bed.transport.name },
    handler: () => undefined,
    onOutcome: () => undefined,
  });
  const subscription = await bed.transport.subscribe(
    'effects',
    [topic],
    { process: (envelope) => (seen.push(envelope), pipeline.process(envelope)) },
    {},
  );
  try {
    const receipt = await bed.transport.publish({ topic, key, body: { n: 1 } });
    await waitUntil(
      () =>
        probe
          .spans()
          .some((span) => span.kind === SpanKind.CONSUMER && span.attributes['oncemq.key'] === key),
      `the consumer span of ${key}`,
    );
    const producer = probe
      .spans()
      .find((span) => span.kind === SpanKind.PRODUCER && span.attributes['oncemq.key'] === key);
    const consumer = probe
      .spans()
      .find((span) => span.kind === SpanKind.CONSUMER && span.attributes['oncemq.key'] === key);
    return { producer, consumer, receipt, headers: seen[0]?.headers ?? {} };
  } finally {
    await subscription.close();
    await ledger.close();
    db.close();
  }
}

function expectOneTrace(
  result: Awaited<ReturnType<typeof publishToEffect>>,
  system: string,
  topic: string,
): void {
  const { producer, consumer, headers } = result;
  expect(producer, 'producer span').toBeDefined();
  expect(consumer, 'consumer span').toBeDefined();
  if (producer === undefined || consumer === undefined) return;
  const { traceId, spanId } = producer.spanContext();
  expect(headers.traceparent).toMatch(new RegExp(`^00-${traceId}-${spanId}-0[01]$`));
  expect(consumer.spanContext().traceId).toBe(traceId);
  expect(consumer.parentSpanContext?.spanId).toBe(spanId);
  expect(consumer.links.map((link) => link.context.spanId)).toEqual([spanId]);
  expect(producer.name).toBe(`send ${topic}`);
  expect(consumer.name).toBe(`process ${topic}`);
  expect(producer.attributes['messaging.system']).toBe(system);
  expect(consumer.attributes).toMatchObject({
    'messaging.system': system,
    'messaging.destination.name': topic,
    'messaging.consumer.group.name': 'effects',
    'messaging.operation.type': 'process',
    'oncemq.outcome': 'executed',
    'oncemq.action': 'ack',
    'oncemq.attempt': 1,
  });
  expect(consumer.events.map((event) => event.name)).toEqual(['claim', 'handler', 'commit']);
  expect(spansOf(traceId)).toHaveLength(2);
}

describe('one trace from publish to effect', () => {
  it('crosses the local broker', async () => {
    const broker = testBroker(dir);
    try {
      const result = await publishToEffect({ transport: broker }, 'orders', 'local-1');
      expectOneTrace(result, 'local', 'orders');
      expect(result.producer?.attributes['messaging.message.id']).toBe(result.receipt.brokerId);
    } finally {
      await broker.close();
    }
  });

  it.skipIf(!rabbit.available)('crosses RabbitMQ', async () => {
    const world = await rabbitWorld(rabbit.url);
    try {
      const result = await publishToEffect({ transport: world.transport }, 'orders', 'rabbit-1');
      expectOneTrace(result, 'rabbitmq', 'orders');
    } finally {
      await world.cleanup();
    }
  });

  it.skipIf(!nats.available)('crosses NATS JetStream', async () => {
    const bed = await natsUnderTest(nats.url);
    try {
      const result = await publishToEffect(bed, 'orders', 'nats-1');
      expectOneTrace(result, 'nats', 'orders');
    } finally {
      await bed.transport.close();
      await bed.cleanup();
    }
  });
});

describe('the consumer span carries the outcome', () => {
  it('as attributes and status, for a dead letter and a duplicate', async () => {
    const db = new Database(':memory:');
    const ledger = new SqliteLedger({ database: db });
    await ledger.init();
    const pipeline = createPipeline<Database.Database, { id: string; fail: boolean }>({
      ledger,
      group: 'span-outcomes',
      telemetry: { system: 'local' },
      key: { jsonPath: 'id' },
      handler: ({ fail }) => {
        if (fail) throw new PermanentError('permanent-error', 'refused by the handler');
      },
    });
    const envelope = (brokerId: string, id: string, fail: boolean): Envelope => ({
      brokerId,
      topic: 'outcomes',
      headers: {},
      body: new TextEncoder().encode(JSON.stringify({ id, fail })),
      deliveryCount: 1,
    });
    try {
      expect((await pipeline.process(envelope('m-1', 'bad-1', true))).kind).toBe('dead');
      expect((await pipeline.process(envelope('m-2', 'good-1', false))).kind).toBe('executed');
      expect((await pipeline.process(envelope('m-3', 'good-1', false))).kind).toBe('duplicate');
      const span = (id: string) =>
        probe
          .spans()
          .find((s) => s.kind === SpanKind.CONSUMER && s.attributes['messaging.message.id'] === id);
      const dead = span('m-1');
      expect(dead?.attributes).toMatchObject({
        'messaging.consumer.group.name': 'span-outcomes',
        'messaging.destination.name': 'outcomes',
        'oncemq.key': 'bad-1',
        'oncemq.outcome': 'dead',
        'oncemq.action': 'dead-letter',
        'oncemq.attempt': 1,
        'oncemq.dead_letter.reason': 'permanent-error',
        'error.type': 'PermanentError',
      });
      expect(dead?.status.code).toBe(SpanStatusCode.ERROR);
      expect(dead?.status.message).toContain('refused by the handler');
      expect(dead?.events.map((event) => event.name)).toEqual(['claim', 'handler']);
      const duplicate = span('m-3');
      expect(duplicate?.attributes).toMatchObject({
        'oncemq.key': 'good-1',
        'oncemq.outcome': 'duplicate',
        'oncemq.action': 'ack',
        'oncemq.duplicate.source': 'republish',
      });
      expect(duplicate?.attributes['error.type']).toBeUndefined();
      expect(duplicate?.status.code).toBe(SpanStatusCode.UNSET);
      expect(span('m-2')?.attributes['oncemq.duplicate.source']).toBeUndefined();
    } finally {
      pipeline.close();
      await ledger.close();
      db.close();
    }
  });
});

describe('with a sample rate, the traces a delivery continues are never cut', () => {
  const traceId = (n: number) => n.toString(16).padStart(32, '0');
  const parentSpan = 'a0a0a0a0a0a0a0a0';

  it('a sampled producer trace always gets its consumer span; other deliveries only when drawn', async () => {
    const db = new Database(':memory:');
    const ledger = new SqliteLedger({ database: db });
    await ledger.init();
    const contexts = new StorageContextManager().register();
    const metrics = new MetricsProbe();
    const seenTraces = new Map<string, string | undefined>();
    const pipeline = createPipeline<Database.Database, { id: string }>({
      ledger,
      group: 'sampled-traces',
      // Practically never drawn: what gets a span here gets it because its trace is sampled.
      telemetry: { system: 'local', sampleRate: 1e-12, meterProvider: metrics.meterProvider },
      key: { jsonPath: 'id' },
      handler: ({ id }) => {
        seenTraces.set(id, trace.getSpanContext(context.active())?.traceId);
      },
    });
    const envelope = (id: string, traceparent?: string): Envelope => ({
      brokerId: `m-${id}`,
      topic: 'sampled',
      headers: traceparent === undefined ? {} : { traceparent },
      body: new TextEncoder().encode(JSON.stringify({ id })),
      deliveryCount: 1,
    });
    try {
      const consumerSpans = () =>
        probe
          .spans()
          .filter(
            (s) =>
              s.kind === SpanKind.CONSUMER &&
              s.attributes['messaging.consumer.group.name'] === 'sampled-traces',
          );
      await pipeline.process(envelope('sampled', `00-${traceId(1)}-${parentSpan}-01`));
      await pipeline.process(envelope('unsampled', `00-${traceId(2)}-${parentSpan}-00`));
      await pipeline.process(envelope('root'));
      const spans = consumerSpans();
      expect(spans.map((s) => s.attributes['oncemq.key'])).toEqual(['sampled']);
      expect(spans[0]?.spanContext().traceId).toBe(traceId(1));
      expect(spans[0]?.parentSpanContext?.spanId).toBe(parentSpan);
      // Each handler ran in its delivery's trace: its own spans would follow the producer's decision.
      expect(seenTraces.get('sampled')).toBe(traceId(1));
      expect(seenTraces.get('unsampled')).toBe(traceId(2));
      expect(seenTraces.get('root')).toBeUndefined();
      // The histograms draw on their own: a span for a sampled trace does not time the delivery.
      const group = { 'messaging.consumer.group.name': 'sampled-traces' };
      expect(await metrics.count(METRICS.consumed, group)).toBe(3);
      for (const histogram of [METRICS.processDuration, METRICS.claimDuration, METRICS.handlerDuration])
        expect(await metrics.observations(histogram, group)).toBe(0);
    } finally {
      await metrics.shutdown();
      contexts.unregister();
      pipeline.close();
      await ledger.close();
      db.close();
    }
  });
});
