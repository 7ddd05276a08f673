// With no OpenTelemetry SDK registered, a pipeline's telemetry does nothing per delivery: no span,
// no producer context read from the headers, no instruments on the API's no-op meter. A tracing SDK
// registered after the pipeline started still gets its spans from the next delivery on.
import type Database from 'better-sqlite3';
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  createNoopMeter,
  propagation,
  ProxyTracer,
  ROOT_CONTEXT,
  trace,
  type Context,
  type ContextManager,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createEnvelope, createPipeline, KEY_HEADER, type Pipeline } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { addPoints, openPointsDb, type PaymentSucceeded } from '../support/points.js';
import { SpanProbe } from '../support/telemetry.js';

const topic = 'payments';
const PRODUCER = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function delivery(eventId: string) {
  const event: PaymentSucceeded = { eventId, orderId: `o-${eventId}`, userId: 'user-1', amount: 100 };
  return createEnvelope({
    brokerId: `b-${eventId}`,
    topic,
    body: event,
    headers: { [KEY_HEADER]: eventId, traceparent: PRODUCER },
  });
}

describe('telemetry with no SDK registered', () => {
  let db: Database.Database;
  let ledger: SqliteLedger<Database.Database>;

  beforeEach(async () => {
    db = openPointsDb(':memory:');
    ledger = new SqliteLedger({ database: db });
    await ledger.init();
  });

  afterEach(async () => {
    vi.restoreAllMocks();
    await ledger.close();
    db.close();
  });

  /** The trace id of the context each handler ran in. */
  const seen: (string | undefined)[] = [];
  const pipeline = (group: string): Pipeline =>
    createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group,
      handler: (event, ctx) => {
        seen.push(trace.getSpanContext(context.active())?.traceId);
        addPoints(ctx.tx, event.userId, event.amount);
      },
    });

  it('starts no span, reads no producer context and makes no instrument', async () => {
    const started = vi.spyOn(ProxyTracer.prototype, 'startSpan');
    const extracted = vi.spyOn(propagation, 'extract');
    const histograms = vi.spyOn(
      Object.getPrototypeOf(createNoopMeter()) as object as { createHistogram: () => unknown },
      'createHistogram',
    );
    const idle = pipeline('idle');
    for (const id of ['i1', 'i2', 'i3']) expect((await idle.process(delivery(id))).kind).toBe('executed');
    expect(started).not.toHaveBeenCalled();
    expect(extracted).not.toHaveBeenCalled();
    expect(histograms).not.toHaveBeenCalled();
  });

  it('traces from the first delivery after an SDK registers, in a pipeline started before', async () => {
    const early = pipeline('early');
    expect((await early.process(delivery('e1'))).kind).toBe('executed');
    const probe = new SpanProbe().registerGlobally();
    try {
      expect((await early.process(delivery('e2'))).kind).toBe('executed');
      expect((await early.process(delivery('e3'))).kind).toBe('executed');
      const spans = probe.spans();
      expect(spans.map((span) => span.name)).toEqual([`process ${topic}`, `process ${topic}`]);
      // The producer's context is read again: the spans continue its trace.
      for (const span of spans) expect(span.spanContext().traceId).toBe(PRODUCER.split('-')[1]);
    } finally {
      await probe.shutdown();
    }
  });

  it('with a propagator and a context manager but no tracer, runs the handler in the producer’s context, spanless', async () => {
    const storage = new AsyncLocalStorage<Context>();
    const manager: ContextManager = {
      active: () => storage.getStore() ?? ROOT_CONTEXT,
      with: (ctx, fn, thisArg, ...args) => storage.run(ctx, () => fn.call(thisArg, ...args)),
      bind: (_ctx, target) => target,
      enable() {
        return this;
      },
      disable() {
        storage.disable();
        return this;
      },
    };
    context.setGlobalContextManager(manager);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const started = vi.spyOn(ProxyTracer.prototype, 'startSpan');
    try {
      seen.length = 0;
      const passing = pipeline('passing');
      expect((await passing.process(delivery('p1'))).kind).toBe('executed');
      expect(seen).toEqual([PRODUCER.split('-')[1]]);
      expect(started).not.toHaveBeenCalled();
    } finally {
      propagation.disable();
      context.disable();
    }
  });
});
