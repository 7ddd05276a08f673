import { join } from 'node:path';
import type Database from 'better-sqlite3';
import {
  createPipeline,
  type Envelope,
  KEY_HEADER,
  type Mode,
  type Outcome,
  type Pipeline,
  RetryPolicy,
} from 'oncemq';
import { LocalBroker, type LocalBrokerConfig } from 'oncemq/local';
import { SqliteLedger } from 'oncemq/sqlite';
import { openPointsDb, payment, sleep, type PaymentSucceeded } from './points.js';

/** Polls `condition` until it holds; fails naming `what` after `limitMs`. A wait, not a timed assertion. */
export async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  what: string,
  limitMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await sleep(10);
  }
}

/** A broker in `dir` with quick timers for tests. */
export function testBroker(dir: string, config: LocalBrokerConfig = {}): LocalBroker {
  return new LocalBroker({
    path: join(dir, 'broker.db'),
    pollInterval: '2ms',
    heartbeatInterval: '50ms',
    sessionTimeout: '1s',
    commitInterval: '1h',
    ...config,
  });
}

/** The fields of every outcome for `envelope`, for consumers that answer without a pipeline. */
export function outcomeBase(envelope: Envelope, group: string, key = envelope.headers[KEY_HEADER] ?? null) {
  return {
    group,
    key,
    topic: envelope.topic,
    brokerId: envelope.brokerId,
    deliveryCount: envelope.deliveryCount,
    elapsedMs: 0,
  };
}

/**
 * An executed delivery to ack, from a consumer that needs no pipeline; `base` defaults to a
 * subscriber of group `g` that reads no key.
 */
export function ackOutcome(
  envelope: Envelope,
  base: ReturnType<typeof outcomeBase> = outcomeBase(envelope, 'g', null),
  mode: Mode = 'transactional',
): Outcome {
  return {
    ...base,
    kind: 'executed',
    action: 'ack',
    mode,
    attempt: 1,
    reclaimed: false,
    leaseLost: false,
  };
}

export const QUICK_RETRY = new RetryPolicy({ name: 'test', delays: ['10ms', '10ms', '10ms'] });

/**
 * The payment-to-points consumer on a SQLite file: the ledger and the business tables in one
 * database; `grants` has one row per applied effect (no unique key), so doubles show.
 */
export class PointsApp {
  readonly db: Database.Database;
  readonly ledger: SqliteLedger<Database.Database>;
  readonly deliveries: Envelope[] = [];
  readonly outcomes: Outcome[] = [];

  constructor(dir: string, file = 'app.db') {
    this.db = openPointsDb(join(dir, file));
    this.db.exec('CREATE TABLE IF NOT EXISTS grants (event_id TEXT NOT NULL, user_id TEXT NOT NULL)');
    this.ledger = new SqliteLedger({ database: this.db });
  }

  /** Applies the effect inside the ledger's transaction. */
  static write(db: Database.Database, event: PaymentSucceeded): void {
    db.prepare(
      'INSERT INTO points (user_id, balance) VALUES (?, 100) ON CONFLICT (user_id) DO UPDATE SET balance = balance + 100',
    ).run(event.userId);
    db.prepare('INSERT INTO grants (event_id, user_id) VALUES (?, ?)').run(event.eventId, event.userId);
  }

  pipeline(options: { group?: string; onHandler?: (event: PaymentSucceeded) => void } = {}): Pipeline {
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger: this.ledger,
      group: options.group ?? 'points',
      retry: QUICK_RETRY,
      replayMargin: 0,
      handler: (event, ctx) => {
        PointsApp.write(ctx.tx, event);
        options.onHandler?.(event);
      },
      onOutcome: (outcome) => this.outcomes.push(outcome),
    });
    return {
      ...pipeline,
      process: (envelope) => {
        this.deliveries.push(envelope);
        return pipeline.process(envelope);
      },
      processBatch: (envelopes) => {
        this.deliveries.push(...envelopes);
        return pipeline.processBatch(envelopes);
      },
    };
  }

  /** Grant rows per event id. */
  effects(): Map<string, number> {
    const rows = this.db.prepare('SELECT event_id, COUNT(*) AS n FROM grants GROUP BY event_id').all() as {
      event_id: string;
      n: number;
    }[];
    return new Map(rows.map((row) => [row.event_id, row.n]));
  }

  async close(): Promise<void> {
    await this.ledger.close();
    this.db.close();
  }
}

/** Publishes events 0..count-1 keyed by event id; returns the receipts. */
export async function publishPayments(broker: LocalBroker, count: number, topic = 'payments', from = 0) {
  const receipts = [];
  for (let index = from; index < from + count; index++) {
    const event = payment(index);
    receipts.push(await broker.publish({ topic, key: event.eventId, body: event }));
  }
  return receipts;
}
