// The Prometheus entry point: a local broker feeds a pipeline whose metrics go to `servePrometheus`;
// `/metrics` is scraped over HTTP and shows the outcome counters, the latency histograms and the
// dead-letter depth the local broker counts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, KEY_HEADER, observeDeadLetterDepth, type Outcome } from 'oncemq';
import type { LocalBroker } from 'oncemq/local';
import { servePrometheus, type PrometheusEndpoint } from 'oncemq/prometheus';
import { SqliteLedger } from 'oncemq/sqlite';
import { testBroker, waitUntil } from '../support/local-points.js';

/** The value of the sample of `metric` whose labels include every one of `labels`; undefined when none. */
function sample(text: string, metric: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const [, body = '', value = ''] = /^[^{]+\{(.*)\} (\S+)/.exec(line) ?? [];
    if (Object.entries(labels).every(([name, want]) => body.includes(`${name}="${want}"`)))
      return Number(value);
  }
  return undefined;
}

describe('the Prometheus endpoint', () => {
  let dir: string;
  let broker: LocalBroker;
  let endpoint: PrometheusEndpoint;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'oncemq-prom-'));
    broker = testBroker(dir);
    endpoint = await servePrometheus({ port: 0 });
  });

  afterEach(async () => {
    await endpoint.close();
    await broker.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the outcome counters, the histograms and the dead-letter depth over HTTP', async () => {
    const db = new Database(':memory:');
    const ledger = new SqliteLedger({ database: db });
    await ledger.init();
    const outcomes: Outcome[] = [];
    const pipeline = createPipeline<Database.Database, { n: number }>({
      ledger,
      group: 'billing',
      telemetry: { meterProvider: endpoint.meterProvider, tracerProvider: false, system: broker.name },
      onOutcome: (outcome) => outcomes.push(outcome),
      handler: () => undefined,
    });
    const subscription = await broker.subscribe('billing', ['invoices'], pipeline);
    const gauge = await observeDeadLetterDepth(broker, ['billing'], {
      meterProvider: endpoint.meterProvider,
    });
    try {
      await broker.publish({ topic: 'invoices', key: 'inv-1', body: { n: 1 } });
      await broker.publish({ topic: 'invoices', key: 'inv-1', body: { n: 1 } }); // a producer retry
      await broker.publish({ topic: 'invoices', key: 'inv-2', body: { n: 2 } });
      await broker.publish({ topic: 'invoices', body: 'not json', headers: { [KEY_HEADER]: 'inv-3' } });
      await waitUntil(() => outcomes.length === 4, 'four outcomes');

      const response = await fetch(endpoint.url);
      expect(response.status).toBe(200);
      const text = await response.text();
      const labels = {
        messaging_consumer_group_name: 'billing',
        messaging_destination_name: 'invoices',
        messaging_system: 'local',
      };
      expect(sample(text, 'oncemq_outcomes_total', { ...labels, oncemq_outcome: 'executed' })).toBe(2);
      expect(
        sample(text, 'oncemq_outcomes_total', {
          ...labels,
          oncemq_outcome: 'duplicate',
          oncemq_duplicate_source: 'republish',
        }),
      ).toBe(1);
      expect(
        sample(text, 'oncemq_outcomes_total', {
          ...labels,
          oncemq_outcome: 'dead',
          oncemq_dead_letter_reason: 'malformed',
        }),
      ).toBe(1);
      expect(sample(text, 'messaging_client_consumed_messages_total', labels)).toBe(4);
      expect(
        sample(text, 'messaging_process_duration_count', {
          messaging_consumer_group_name: 'billing',
          oncemq_outcome: 'executed',
        }),
      ).toBe(2);
      expect(sample(text, 'oncemq_claim_duration_count', { oncemq_claim_status: 'acquired' })).toBe(2);
      expect(sample(text, 'oncemq_handler_duration_count', {})).toBe(2);
      expect(
        sample(text, 'oncemq_dead_letter_depth', {
          messaging_consumer_group_name: 'billing',
          messaging_system: 'local',
        }),
      ).toBe(1);

      expect((await fetch(new URL('/other', endpoint.url))).status).toBe(404);
    } finally {
      gauge.close();
      await subscription.close();
      await ledger.close();
      db.close();
    }
  });

  it('refuses a port that is taken, naming it', async () => {
    const port = Number(new URL(endpoint.url).port);
    await expect(servePrometheus({ port })).rejects.toThrow(`cannot listen on 127.0.0.1:${port}`);
  });
});
