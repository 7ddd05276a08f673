// The dashboard beside a consumer on the local broker: dead letters replayed to the group's consumer,
// a missing broker file shown as an error, and counters read from the consumer's Prometheus endpoint.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, type Outcome, PermanentError } from 'oncemq';
import type { LocalBroker } from 'oncemq/local';
import { servePrometheus } from 'oncemq/prometheus';
import { SqliteLedger } from 'oncemq/sqlite';
import { act, dashboards, state } from '../support/dashboard.js';
import { testBroker, waitUntil } from '../support/local-points.js';
import { scratchDir } from '../support/points.js';

describe('dashboard dead letters on the local broker', () => {
  const open = dashboards();
  let scratch: ReturnType<typeof scratchDir>;
  let broker: LocalBroker;
  let db: Database.Database;
  let ledger: SqliteLedger<Database.Database>;

  beforeEach(async () => {
    scratch = scratchDir();
    broker = testBroker(scratch.dir, { commitInterval: '20ms' });
    db = new Database(':memory:');
    ledger = new SqliteLedger<Database.Database>({ database: db });
    await ledger.init();
    await broker.init();
  });

  afterEach(async () => {
    await broker.close();
    await ledger.close();
    db.close();
    scratch.remove();
  });

  it('replays a dead letter to the group: the fixed consumer applies it once', async () => {
    let broken = true;
    const outcomes: Outcome[] = [];
    const applied: string[] = [];
    const pipeline = createPipeline<Database.Database, { n: number }>({
      ledger,
      group: 'billing',
      onOutcome: (outcome) => outcomes.push(outcome),
      handler: (_event, ctx) => {
        if (broken) throw new PermanentError('invalid', 'the handler has a bug');
        applied.push(ctx.key);
      },
    });
    const subscription = await broker.subscribe('billing', ['invoices'], pipeline);
    try {
      await broker.publish({ topic: 'invoices', key: 'inv-1', body: { n: 1 } });
      await broker.publish({ topic: 'invoices', key: 'inv-2', body: { n: 2 } });
      await waitUntil(() => outcomes.filter((o) => o.kind === 'dead').length === 2, 'two dead letters');
      const dashboard = await open({
        groups: ['billing'],
        transport: { name: 'local', url: join(scratch.dir, 'broker.db') },
      });
      const shown = (await state(dashboard)).deadLetters?.billing;
      if (shown?.ok !== true) throw new Error(`dead letters not shown: ${JSON.stringify(shown)}`);
      expect(shown.value.map((letter) => letter.key)).toEqual(['inv-1', 'inv-2']);
      const [first, second] = shown.value;
      expect(first).toMatchObject({ reason: 'permanent-error', body: '{"n":1}', bodyEncoding: 'utf8' });
      expect(first?.error).toContain('the handler has a bug');

      broken = false;
      const replayed = await act(dashboard, '/api/dead-letters/replay', {
        group: 'billing',
        ids: [first?.id],
      });
      expect(JSON.parse(replayed.body)).toEqual({ requested: 1, done: 1 });
      await waitUntil(() => applied.includes('inv-1'), 'the replayed copy to be applied');
      const executed = outcomes.find((o) => o.kind === 'executed' && o.key === 'inv-1');
      expect(executed?.deliveryCount).toBe(1);

      const discarded = await act(dashboard, '/api/dead-letters/discard', {
        group: 'billing',
        ids: [second?.id],
      });
      expect(JSON.parse(discarded.body)).toEqual({ requested: 1, done: 1 });
      expect((await state(dashboard)).deadLetters?.billing).toEqual({ ok: true, value: [] });
      await broker.publish({ topic: 'invoices', key: 'inv-3', body: { n: 3 } });
      await waitUntil(() => applied.includes('inv-3'), 'a later message');
      expect(applied).toEqual(['inv-1', 'inv-3']);
    } finally {
      await subscription.close();
    }
  });

  it('shows a broker file that is not there as an error, and creates none', async () => {
    const missing = join(scratch.dir, 'elsewhere', 'broker.db');
    const dashboard = await open({ groups: ['billing'], transport: { name: 'local', url: missing } });
    const shown = (await state(dashboard)).deadLetters?.billing;
    expect(shown?.ok).toBe(false);
    expect(existsSync(missing)).toBe(false);
  });

  it('reads the outcome counters of a consumer from its Prometheus endpoint, by group', async () => {
    const endpoint = await servePrometheus({ port: 0 });
    const outcomes: Outcome[] = [];
    const pipeline = createPipeline<Database.Database, { n: number }>({
      ledger,
      group: 'billing',
      telemetry: { meterProvider: endpoint.meterProvider, tracerProvider: false, system: broker.name },
      onOutcome: (outcome) => outcomes.push(outcome),
      handler: () => undefined,
    });
    const subscription = await broker.subscribe('billing', ['invoices'], pipeline);
    try {
      await broker.publish({ topic: 'invoices', key: 'inv-1', body: { n: 1 } });
      await broker.publish({ topic: 'invoices', key: 'inv-1', body: { n: 1 } });
      await broker.publish({ topic: 'invoices', key: 'inv-2', body: 'not json' });
      await waitUntil(() => outcomes.length === 3, 'three outcomes');
      const dashboard = await open({ groups: ['billing'], metrics: endpoint.url });
      const metrics = (await state(dashboard)).metrics;
      expect(metrics).toMatchObject({
        ok: true,
        value: {
          deliveries: 3,
          outcomes: { executed: 1, duplicate: 1, dead: 1 },
          duplicates: { republish: 1, redelivery: 0 },
          deadLettered: { malformed: 1 },
        },
      });
      const elsewhere = await open({ groups: ['shipping'], metrics: endpoint.url });
      expect((await state(elsewhere)).metrics).toMatchObject({ ok: true, value: { deliveries: 0 } });
    } finally {
      await subscription.close();
      await endpoint.close();
    }
  });
});
