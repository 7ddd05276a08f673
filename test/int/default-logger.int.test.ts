// Failures are visible by default: on a SQLite ledger (no server), a handler whose SQL fails, its dead
// letter, a commit the database could not make and a lost lease each leave a warning on the default
// logger's sink; in a process given no logger at all, the same lines reach stderr.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  consoleLogger,
  createEnvelope,
  createPipeline,
  KEY_HEADER,
  LeaseLostError,
  RetryPolicy,
  type LoggerLike,
  type Outcome,
} from 'oncemq';
import { SqliteLedger, type SqliteDatabaseLike } from 'oncemq/sqlite';
import { injectCommitFailures } from 'oncemq/testing';
import { buildPackage, runNode } from '../support/built-package.js';
import { scratchDir } from '../support/points.js';

interface Order {
  readonly orderId: string;
}

const order = (deliveryCount: number) =>
  createEnvelope({
    brokerId: `b-${deliveryCount}`,
    topic: 'orders',
    body: { orderId: 'order-7' },
    headers: { [KEY_HEADER]: 'order-7' },
    deliveryCount,
  });

/** One delayed retry, then the dead-letter queue. */
const ONE_RETRY = new RetryPolicy({ name: 'one-retry', delays: ['1s'] });

describe('the default logger on a SQLite pipeline', () => {
  const scratch = scratchDir();
  afterAll(() => {
    scratch.remove();
  });

  function shipping(logger: LoggerLike, file: string, commitFails = false) {
    const sqlite = new SqliteLedger({ database: join(scratch.dir, file), logger });
    const ledger = commitFails ? injectCommitFailures(sqlite, { commitFailure: () => true }) : sqlite;
    const pipeline = createPipeline<SqliteDatabaseLike, Order>({
      ledger,
      group: 'shipping',
      retry: ONE_RETRY,
      logger,
      telemetry: false,
      handler: (message, ctx) => {
        // the table was never created: every run of the handler fails in SQLite
        if (!commitFails) ctx.tx.prepare('INSERT INTO shipments (order_id) VALUES (?)').run(message.orderId);
      },
    });
    return { pipeline, close: () => sqlite.close() };
  }

  it('a handler whose SQL fails leaves a warning with its key and the SQL error; its dead letter another, with the reason', async () => {
    const lines: string[] = [];
    const logger = consoleLogger({ write: (line) => void lines.push(line) });
    const { pipeline, close } = shipping(logger, 'failing.db');
    const first: Outcome = await pipeline.process(order(1));
    expect(first.kind).toBe('retry');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^\S+Z WARN oncemq: the handler failed; retry scheduled group=shipping key=order-7 brokerId=b-1 attempt=1 outcome=retry delayMs=1000 charged=true error="SqliteError: no such table: shipments"\n$/,
    );
    const second = await pipeline.process(order(2));
    expect(second.kind).toBe('dead');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(
      /^\S+Z WARN oncemq: dead-lettered \(retries-exhausted\) group=shipping key=order-7 brokerId=b-2 attempt=2 outcome=dead error="SqliteError: no such table: shipments"\n$/,
    );
    await close();
  });

  it('a commit the database could not make is a warning that the message comes again, not charged', async () => {
    const lines: string[] = [];
    const logger = consoleLogger({ write: (line) => void lines.push(line) });
    const { pipeline, close } = shipping(logger, 'outage.db', true);
    const outcome = await pipeline.process(order(1));
    expect(outcome).toMatchObject({ kind: 'retry', nextDeliveryCount: 1 });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /WARN oncemq: ledger unavailable; the message comes again \(not charged\) group=shipping key=order-7 .*charged=false error="LedgerUnavailableError: the commit of key 'order-7' failed/,
    );
    await close();
  });

  it('a lease the ledger says is lost aborts the handler with a warning, and its message comes again uncharged with another', async () => {
    const lines: string[] = [];
    const logger = consoleLogger({ write: (line) => void lines.push(line) });
    const sqlite = new SqliteLedger({ database: join(scratch.dir, 'lease.db'), logger });
    // every renewal is refused: another owner took the key
    const ledger = new Proxy(sqlite, {
      get(target, property, receiver) {
        if (property === 'renew') {
          return (claim: { group: string; key: string; attempt: number }) =>
            Promise.reject(new LeaseLostError(claim.group, claim.key, claim.attempt));
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const pipeline = createPipeline<unknown, Order>({
      ledger,
      group: 'shipping',
      mode: 'leased',
      lease: '300ms',
      renewEvery: '50ms',
      logger,
      telemetry: false,
      handler: (_message, ctx) =>
        new Promise((_, reject) => {
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
        }),
    });
    const outcome = await pipeline.process(order(1));
    expect(outcome).toMatchObject({ kind: 'retry', nextDeliveryCount: 1 });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /WARN oncemq: lease lost; the handler's signal is aborted group=shipping key=order-7 attempt=1 error="LeaseLostError: lease lost on group 'shipping' key 'order-7'/,
    );
    expect(lines[1]).toMatch(
      /WARN oncemq: lease lost; the message comes again \(not charged\) group=shipping key=order-7 .*charged=false/,
    );
    await sqlite.close();
  });

  it('a duplicate is not a warning', async () => {
    const lines: string[] = [];
    const logger = consoleLogger({ write: (line) => void lines.push(line), level: 'info' });
    const sqlite = new SqliteLedger({ database: join(scratch.dir, 'dup.db'), logger });
    const pipeline = createPipeline<SqliteDatabaseLike, Order>({
      ledger: sqlite,
      group: 'shipping',
      logger,
      telemetry: false,
      handler: () => undefined,
    });
    expect((await pipeline.process(order(1))).kind).toBe('executed');
    expect((await pipeline.process(order(1))).kind).toBe('duplicate');
    expect(lines.filter((line) => / (WARN|ERROR) /.test(line))).toEqual([]);
    await sqlite.close();
  });
});

/** A program given no logger: a pipeline whose handler's SQL fails, twice, on the built package. */
const NO_LOGGER = `
import { createEnvelope, createPipeline, KEY_HEADER, RetryPolicy } from './index.js';
import { SqliteLedger } from './sqlite.js';

const ledger = new SqliteLedger({ database: process.argv[2] });
const pipeline = createPipeline({
  ledger,
  group: 'shipping',
  retry: new RetryPolicy({ delays: ['1s'] }),
  telemetry: false,
  handler: (message, ctx) => ctx.tx.prepare('INSERT INTO shipments (order_id) VALUES (?)').run(message.orderId),
});
for (const deliveryCount of [1, 2]) {
  const envelope = createEnvelope({
    brokerId: 'b-' + deliveryCount, topic: 'orders', body: { orderId: 'order-7' },
    headers: { [KEY_HEADER]: 'order-7' }, deliveryCount,
  });
  process.stdout.write((await pipeline.process(envelope)).kind + '\\n');
}
await ledger.close();
`;

describe('a program that passes no logger', () => {
  const scratch = scratchDir();
  afterAll(() => {
    scratch.remove();
  });

  it('writes the failed handler and the dead letter to stderr, one line each', async () => {
    const build = buildPackage();
    const program = join(build.dir, 'no-logger-program.mjs');
    writeFileSync(program, NO_LOGGER);
    const run = await runNode(program, [join(scratch.dir, 'no-logger.db')]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('retry\ndead\n');
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/WARN oncemq: the handler failed; retry scheduled group=shipping key=order-7 /);
    expect(lines[0]).toContain('no such table: shipments');
    expect(lines[1]).toMatch(/WARN oncemq: dead-lettered \(retries-exhausted\) group=shipping key=order-7 /);
  });
});
