import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createPipeline } from '../src/consumer/pipeline.js';
import { RetryPolicy } from '../src/core/retry-policy.js';
import type { Envelope } from '../src/core/envelope.js';
import { SqliteLedger } from '../src/ledger/sqlite/sqlite-ledger.js';
import type { TelemetryConfig } from '../src/telemetry/pipeline-telemetry.js';
import { sideBySide, type Contender, type Suite } from './harness.js';
import { BENCH_SAMPLE_RATE, benchTelemetry } from './telemetry.js';

interface Payment {
  readonly eventId: string;
  readonly userId: string;
}

const encoder = new TextEncoder();

function message(prefix: string, sequence: number): Envelope {
  const body = encoder.encode(
    JSON.stringify({ eventId: `${prefix}-${sequence}`, userId: `user-${sequence % 1000}` }),
  );
  return { brokerId: `${prefix}:${sequence}`, topic: 'payments', headers: {}, body, deliveryCount: 1 };
}

/**
 * The payment-to-points transaction on SQLite: claim the event id in the ledger and add 100 points,
 * by hand with better-sqlite3 (`raw`) and through the oncemq pipeline in each mode.
 */
export const suite: Suite = {
  name: 'sqlite',
  description: 'claim + points update per message: raw better-sqlite3 vs oncemq transactional and leased',
  async run({ seconds, flags }) {
    const synchronous = flags.synchronous ?? 'full';
    if (synchronous !== 'full' && synchronous !== 'normal')
      throw new Error(`--flag synchronous=full|normal, got ${synchronous}`);
    const dir = mkdtempSync(join(tmpdir(), 'oncemq-bench-'));
    const db = new Database(flags.database === 'memory' ? ':memory:' : join(dir, 'bench.db'));
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous.toUpperCase()}`);
    db.exec('CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
    const ledger = new SqliteLedger({ database: db });
    await ledger.init();
    const add = db.prepare(
      'INSERT INTO points (user_id, balance) VALUES (?, 100) ON CONFLICT (user_id) DO UPDATE SET balance = balance + 100',
    );
    const claim = db.prepare(
      `INSERT INTO oncemq_ledger (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
       VALUES (?, ?, 'SUCCESS', ?, ?, 1, NULL, ?, ?, ?, ?) ON CONFLICT (consumer_group, msg_key) DO NOTHING`,
    );
    const rawTx = db.transaction((envelope: Envelope) => {
      const payment = JSON.parse(Buffer.from(envelope.body).toString('utf8')) as Payment;
      const now = Date.now();
      const inserted = claim.run(
        'raw',
        payment.eventId,
        null,
        'owner',
        envelope.brokerId,
        envelope.topic,
        now,
        now,
      );
      if (inserted.changes === 1) add.run(payment.userId);
    });
    const retry = RetryPolicy.rocketmq();
    const pipeline = (mode: 'transactional' | 'leased', telemetry: TelemetryConfig | false = false) =>
      createPipeline<Database.Database, Payment>({
        ledger,
        // Equal lengths: the rows compared write keys and groups of one size into the same index.
        group: telemetry === false ? `${mode}-bare` : `${mode}-otel`,
        mode,
        telemetry,
        retry,
        fingerprint: flags.fingerprint !== 'false',
        key: { jsonPath: 'eventId' },
        handler: (payment) => {
          add.run(payment.userId);
        },
      });
    const transactional = pipeline('transactional');
    const leased = pipeline('leased');
    const otel = benchTelemetry();
    // `--flag sampleRate=0.01,0.05,0.1`: the first rate is the `:otel` row, each further one a row `:otel@<rate>`.
    const sampleRates = (flags.sampleRate ?? String(BENCH_SAMPLE_RATE)).split(',').map(Number);
    if (!sampleRates.every((rate) => rate > 0 && rate <= 1))
      throw new Error(`--flag sampleRate=<above 0, at most 1>[,…], got ${flags.sampleRate}`);
    const sampled = sampleRates.map((rate, i) => {
      const telemetry = benchTelemetry('sampled', rate);
      return {
        rate,
        name: i === 0 ? 'oncemq:transactional:otel' : `oncemq:transactional:otel@${rate}`,
        tag: `tx-ots${i}`,
        telemetry,
        pipeline: pipeline('transactional', { ...telemetry.config, system: 'local' }),
      };
    });
    const fullOtel = pipeline('transactional', { ...otel.config, system: 'full' });
    const metricsOnly = pipeline('transactional', {
      ...otel.config,
      tracerProvider: false,
      system: 'metrics',
    });
    const tracesOnly = pipeline('transactional', { ...otel.config, meterProvider: false, system: 'traces' });
    try {
      return await sideBySide(
        [
          {
            name: 'raw',
            concurrency: 1,
            op: (i) => rawTx.immediate(message('raw', i)),
            note: `synchronous=${synchronous}`,
          },
          {
            name: 'oncemq:transactional',
            concurrency: 1,
            op: (i) => transactional.process(message('tx-plain0', i)),
            note: `synchronous=${synchronous}`,
          },
          ...sampled.map(({ rate, name, tag, pipeline: otelPipeline }): Contender => ({
            name,
            concurrency: 1,
            op: (i) => otelPipeline.process(message(tag, i)),
            note: `synchronous=${synchronous}, OpenTelemetry metrics (every delivery counted) + sampleRate ${rate} (timed and traced)`,
            baseline: 'oncemq:transactional',
          })),
          {
            name: 'oncemq:transactional:otel-full',
            concurrency: 1,
            op: (i) => fullOtel.process(message('tx-otelf0', i)),
            note: `synchronous=${synchronous}, OpenTelemetry metrics (every delivery timed) + a span per delivery`,
            baseline: 'oncemq:transactional',
          },
          {
            name: 'oncemq:transactional:otel-metrics',
            concurrency: 1,
            op: (i) => metricsOnly.process(message('tx-otelm0', i)),
            note: `synchronous=${synchronous}, OpenTelemetry metrics only (every delivery timed)`,
            baseline: 'oncemq:transactional',
          },
          {
            name: 'oncemq:transactional:otel-traces',
            concurrency: 1,
            op: (i) => tracesOnly.process(message('tx-otelt0', i)),
            note: `synchronous=${synchronous}, a span per delivery only`,
            baseline: 'oncemq:transactional',
          },
          {
            name: 'oncemq:leased',
            concurrency: 1,
            op: (i) => leased.process(message('leased', i)),
            note: `synchronous=${synchronous}`,
          },
        ],
        // Short slices in many rounds: the rows compared differ by a few percent, less than a busy second
        // on a shared machine tilts one long slice.
        { seconds, rounds: Number(flags.rounds ?? 20) },
      );
    } finally {
      await Promise.all([otel.shutdown(), ...sampled.map(({ telemetry }) => telemetry.shutdown())]);
      await ledger.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
