// OpenTelemetry metrics of a pipeline on a SQLite ledger, read through the SDK's in-memory exporter:
// exact counts per outcome, duplicate source and dead-letter reason, and the latency histograms.
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { metrics } from '@opentelemetry/api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createEnvelope,
  createPipeline,
  KEY_HEADER,
  METRICS,
  PermanentError,
  RetryPolicy,
  type Pipeline,
} from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { addPoints, openPointsDb, scratchDir, sleep, type PaymentSucceeded } from '../support/points.js';
import { MetricsProbe } from '../support/telemetry.js';

const topic = 'payments';

function delivery(
  eventId: string,
  brokerId: string,
  extra: Partial<PaymentSucceeded> = {},
  deliveryCount = 1,
) {
  const event: PaymentSucceeded = {
    eventId,
    orderId: `o-${eventId}`,
    userId: 'user-1',
    amount: 100,
    ...extra,
  };
  return createEnvelope({ brokerId, topic, body: event, headers: { [KEY_HEADER]: eventId }, deliveryCount });
}

describe('OpenTelemetry metrics of a pipeline', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let db: Database.Database;
  let ledger: SqliteLedger<Database.Database>;
  let probe: MetricsProbe;

  beforeEach(async () => {
    scratch = scratchDir();
    db = openPointsDb(join(scratch.dir, 'app.db'));
    ledger = new SqliteLedger({ database: db });
    await ledger.init();
    probe = new MetricsProbe();
  });

  afterEach(async () => {
    await probe.shutdown();
    await ledger.close();
    db.close();
    scratch.remove();
  });

  function pipeline(failOnce: Set<string>): Pipeline {
    return createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      retry: RetryPolicy.exponential({ base: '1s', max: '1s', count: 3 }),
      telemetry: { meterProvider: probe.meterProvider, tracerProvider: false, system: 'local' },
      handler: (event, ctx) => {
        if (event.userId === 'poison') throw new PermanentError('bad-user', 'no such user');
        if (failOnce.delete(event.eventId)) throw new Error(`${event.eventId} fails once`);
        addPoints(ctx.tx, event.userId, event.amount);
      },
    });
  }

  it('counts each outcome by kind, duplicate source and dead-letter reason, exactly', async () => {
    const points = pipeline(new Set(['e4']));
    const kinds: string[] = [];
    const run = async (envelope: ReturnType<typeof delivery>) =>
      kinds.push((await points.process(envelope)).kind);
    for (const id of ['e1', 'e2', 'e3']) await run(delivery(id, `b-${id}`));
    await run(delivery('e1', 'b-e1')); // the same stored copy again: redelivery
    await run(delivery('e1', 'b-e1-resent')); // another stored copy: republish
    await run(delivery('e2', 'b-e2-other', { amount: 999 })); // same key, other payload: conflict
    await run(delivery('e4', 'b-e4')); // fails once: retry
    await run(delivery('e4', 'b-e4', {}, 2)); // the retry succeeds
    await run(delivery('e5', 'b-e5', { userId: 'poison' })); // permanent error: dead
    await run(
      createEnvelope({ brokerId: 'b-bad', topic, body: 'not json', headers: { [KEY_HEADER]: 'e6' } }),
    );
    expect(kinds).toEqual([
      'executed',
      'executed',
      'executed',
      'duplicate',
      'duplicate',
      'conflict',
      'retry',
      'executed',
      'dead',
      'dead',
    ]);

    const group = { 'messaging.consumer.group.name': 'points', 'messaging.destination.name': topic };
    const outcomes = (match: Record<string, string>) => probe.count(METRICS.outcomes, { ...group, ...match });
    expect(await probe.count(METRICS.consumed, { ...group, 'messaging.system': 'local' })).toBe(10);
    expect(await outcomes({ 'oncemq.outcome': 'executed' })).toBe(4);
    expect(await outcomes({ 'oncemq.outcome': 'duplicate', 'oncemq.duplicate.source': 'redelivery' })).toBe(
      1,
    );
    expect(await outcomes({ 'oncemq.outcome': 'duplicate', 'oncemq.duplicate.source': 'republish' })).toBe(1);
    expect(await outcomes({ 'oncemq.outcome': 'conflict', 'oncemq.dead_letter.reason': 'conflict' })).toBe(1);
    expect(await outcomes({ 'oncemq.outcome': 'retry' })).toBe(1);
    expect(await outcomes({ 'oncemq.outcome': 'dead', 'oncemq.dead_letter.reason': 'permanent-error' })).toBe(
      1,
    );
    expect(await outcomes({ 'oncemq.outcome': 'dead', 'oncemq.dead_letter.reason': 'malformed' })).toBe(1);
    expect(await outcomes({ 'oncemq.outcome': 'busy' })).toBe(0);

    // Every delivery's duration; a claim per readable delivery (9); a handler run per won claim (6).
    expect(
      await probe.observations(METRICS.processDuration, { 'messaging.consumer.group.name': 'points' }),
    ).toBe(10);
    expect(await probe.observations(METRICS.processDuration, { 'oncemq.outcome': 'dead' })).toBe(2);
    expect(await probe.observations(METRICS.claimDuration, { 'oncemq.claim.status': 'acquired' })).toBe(5);
    // e4's second copy takes over the FAIL row its first attempt left.
    expect(await probe.observations(METRICS.claimDuration, { 'oncemq.claim.status': 'reclaimed' })).toBe(1);
    expect(await probe.observations(METRICS.claimDuration, { 'oncemq.claim.status': 'duplicate' })).toBe(2);
    expect(await probe.observations(METRICS.claimDuration, { 'oncemq.claim.status': 'conflict' })).toBe(1);
    expect(await probe.observations(METRICS.handlerDuration)).toBe(6);
    expect(await probe.observations(METRICS.handlerDuration, { 'error.type': 'Error' })).toBe(1);
    expect(await probe.observations(METRICS.handlerDuration, { 'error.type': 'PermanentError' })).toBe(1);
  });

  it('counts a busy copy in leased mode and reports the stalest PROCESSING claim while it runs', async () => {
    let release: () => void = () => undefined;
    const running = new Promise<void>((resolve) => (release = resolve));
    const leased = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'mailer',
      mode: 'leased',
      lease: '30s',
      telemetry: { meterProvider: probe.meterProvider, tracerProvider: false },
      handler: () => running,
    });
    const first = leased.process(delivery('m1', 'b-m1'));
    await sleep(50);
    expect((await leased.process(delivery('m1', 'b-m1-copy'))).kind).toBe('busy');
    const [age] = await probe.points(METRICS.oldestProcessing);
    expect(age?.attributes).toEqual({ 'messaging.consumer.group.name': 'mailer' });
    expect(age?.value as number).toBeGreaterThan(0);
    release();
    expect((await first).kind).toBe('executed');
    expect(
      await probe.count(METRICS.outcomes, {
        'oncemq.outcome': 'busy',
        'oncemq.duplicate.source': 'concurrent',
      }),
    ).toBe(1);
    expect(await probe.count(METRICS.outcomes, { 'oncemq.outcome': 'executed' })).toBe(1);
    const [after] = await probe.points(METRICS.oldestProcessing);
    expect(after?.value).toBe(0);
  });

  it('reports to the global meter provider by default, and nothing with telemetry: false', async () => {
    metrics.setGlobalMeterProvider(probe.meterProvider);
    try {
      const handler = (event: PaymentSucceeded, ctx: { tx: Database.Database }) =>
        addPoints(ctx.tx, event.userId, event.amount);
      const off = createPipeline<Database.Database, PaymentSucceeded>({
        ledger,
        group: 'quiet',
        telemetry: false,
        handler,
      });
      const global = createPipeline<Database.Database, PaymentSucceeded>({ ledger, group: 'loud', handler });
      expect((await off.process(delivery('q1', 'b-q1'))).kind).toBe('executed');
      expect((await global.process(delivery('q1', 'b-q1'))).kind).toBe('executed');
      expect(await probe.count(METRICS.consumed, { 'messaging.consumer.group.name': 'quiet' })).toBe(0);
      expect(await probe.count(METRICS.consumed, { 'messaging.consumer.group.name': 'loud' })).toBe(1);
    } finally {
      metrics.disable();
    }
  });

  it('with a sample rate, counts every delivery and times the drawn ones into all three histograms', async () => {
    const sampled = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'sampled',
      telemetry: { meterProvider: probe.meterProvider, tracerProvider: false, sampleRate: 0.5 },
      handler: (event, ctx) => addPoints(ctx.tx, event.userId, event.amount),
    });
    const deliveries = 400;
    for (let i = 0; i < deliveries; i++) await sampled.process(delivery(`s${i}`, `b-s${i}`));
    const group = { 'messaging.consumer.group.name': 'sampled' };
    expect(await probe.count(METRICS.consumed, group)).toBe(deliveries);
    expect(await probe.count(METRICS.outcomes, { ...group, 'oncemq.outcome': 'executed' })).toBe(deliveries);
    const timed = await probe.observations(METRICS.processDuration, group);
    // Binomial(400, 0.5): 200 ± 10; outside 120–280 is more than eight standard deviations away.
    expect(timed).toBeGreaterThan(120);
    expect(timed).toBeLessThan(280);
    // One draw per delivery: a timed delivery is timed in every histogram.
    expect(await probe.observations(METRICS.claimDuration, group)).toBe(timed);
    expect(await probe.observations(METRICS.handlerDuration, group)).toBe(timed);
    sampled.close();
  });

  it('refuses a sample rate outside (0, 1]', () => {
    for (const sampleRate of [0, -0.1, 1.5, Number.NaN, '0.5']) {
      expect(() =>
        createPipeline({
          ledger,
          group: 'bad-rate',
          telemetry: { sampleRate: sampleRate as number },
          handler: () => undefined,
        }),
      ).toThrow(/telemetry\.sampleRate/);
    }
  });
});
