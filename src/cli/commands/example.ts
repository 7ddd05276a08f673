import { createPipeline } from '../../consumer/pipeline.js';
import { createEnvelope } from '../../core/envelope.js';
import { SqliteLedger, type SqliteDatabaseLike } from '../../ledger/sqlite/sqlite-ledger.js';
import { parseOptions, positiveOption, type Command } from '../command.js';

const usage = `Usage: oncemq example [--events N] [--copies N] [--json]

Runs the payment-to-points example on an in-memory SQLite ledger: every payment-succeeded
event is delivered --copies times (redeliveries and producer republishes mixed), each adds
100 points to its user once. Exits 0 when every user has exactly 100 points per event.

  --events N   distinct events (default 1000)
  --copies N   deliveries of each event (default 3)
  --json       print the result as one JSON object`;

interface PaymentSucceeded {
  readonly eventId: string;
  readonly userId: string;
}

export const exampleCommand: Command = {
  name: 'example',
  summary: 'the payment-to-points example on an in-memory SQLite ledger',
  usage,
  async run(args) {
    const { values } = parseOptions(args, {
      events: { type: 'string' },
      copies: { type: 'string' },
      json: { type: 'boolean', default: false },
    });
    const events = positiveOption(values.events, 'events', 1000);
    const copies = positiveOption(values.copies, 'copies', 3);
    const ledger = new SqliteLedger({ database: ':memory:' });
    await ledger.init();
    const db = ledger.database;
    db.exec('CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
    const add = db.prepare(
      'INSERT INTO points (user_id, balance) VALUES (?, 100) ON CONFLICT (user_id) DO UPDATE SET balance = balance + 100',
    );
    const pipeline = createPipeline<SqliteDatabaseLike, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: (event) => {
        add.run(event.userId);
      },
    });
    const users = Math.max(1, Math.ceil(events / 10));
    const started = performance.now();
    for (let copy = 0; copy < copies; copy++) {
      for (let i = 0; i < events; i++) {
        const event: PaymentSucceeded = { eventId: `evt-${i}`, userId: `user-${i % users}` };
        // odd copies are producer republishes (a new broker id), even ones redeliveries of the first copy
        const brokerId = copy % 2 === 1 ? `copy-${copy}-${i}` : `copy-0-${i}`;
        await pipeline.process(
          createEnvelope({ brokerId, topic: 'payments', body: event, deliveryCount: copy + 1 }),
        );
      }
    }
    const elapsedMs = performance.now() - started;
    const expected = new Map<string, number>();
    for (let i = 0; i < events; i++)
      expected.set(`user-${i % users}`, (expected.get(`user-${i % users}`) ?? 0) + 100);
    const rows = db.prepare('SELECT user_id, balance FROM points').all() as {
      user_id: string;
      balance: number;
    }[];
    const wrong =
      rows.filter((row) => expected.get(row.user_id) !== row.balance).length +
      Math.max(0, expected.size - rows.length);
    const metrics = pipeline.metrics();
    const result = {
      events,
      deliveries: metrics.deliveries,
      effects: metrics.outcomes.executed,
      duplicates: metrics.duplicates,
      usersWithWrongBalance: wrong,
      ok: wrong === 0 && metrics.outcomes.executed === events,
      elapsedMs: Math.round(elapsedMs),
      messagesPerSecond: Math.round((metrics.deliveries * 1000) / elapsedMs),
    };
    await ledger.close();
    if (values.json) {
      console.log(JSON.stringify(result));
    } else {
      console.log(`payment-to-points on SQLite: ${events} events × ${copies} deliveries`);
      console.log(`  effects applied        ${result.effects}`);
      console.log(
        `  duplicates absorbed    redelivery ${metrics.duplicates.redelivery}, republish ${metrics.duplicates.republish}`,
      );
      console.log(`  users with wrong total ${wrong}`);
      console.log(`  ${result.messagesPerSecond} deliveries/s in ${result.elapsedMs} ms`);
      console.log(
        result.ok ? 'OK: every event applied exactly once' : 'FAILED: effects do not match the events',
      );
    }
    return result.ok ? 0 : 1;
  },
};
