import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPipeline } from 'oncemq';
import { MysqlLedger } from 'oncemq/mysql';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';
import { paymentEnvelope, sleep, type PaymentSucceeded } from '../support/points.js';
import { describePaymentToPoints, type PointsWorld } from '../support/points-scenario.js';

const service = await mysqlService();
const event: PaymentSucceeded = { eventId: 'evt-1', orderId: 'order-1', userId: 'user-1', amount: 100 };

// 50 concurrent deliveries, each on a pool connection of its own; one pool for the file
let sharedPool: Pool | undefined;
const pool = (): Pool => (sharedPool ??= testPool(service.url, { size: 50 }));

afterAll(async () => {
  await sharedPool?.end();
});

/** A fresh ledger table and points table, as one payment-to-points world. */
async function openWorld(): Promise<
  PointsWorld<PoolConnection> & {
    table: string;
    ledger: MysqlLedger<PoolConnection>;
    /** The points write on a connection or, for the naive consumer, the pool. */
    write: (conn: PoolConnection | Pool, userId: string, amount: number) => Promise<unknown>;
  }
> {
  const table = uniqueTable('pipe');
  const points = `${table}_points`;
  await pool().query(
    `CREATE TABLE \`${points}\` (user_id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL) ENGINE = InnoDB`,
  );
  const ledger = new MysqlLedger<PoolConnection>({ pool: pool(), table });
  await ledger.init();
  const write = (conn: PoolConnection | Pool, userId: string, amount: number) =>
    conn.execute(
      `INSERT INTO \`${points}\` (user_id, balance) VALUES (?, ?) ON DUPLICATE KEY UPDATE balance = balance + ?`,
      [userId, amount, amount],
    );
  return {
    table,
    ledger,
    write,
    addPoints: write,
    balance: async (userId) => {
      const [found] = await pool().execute<RowDataPacket[]>(
        `SELECT balance FROM \`${points}\` WHERE user_id = ?`,
        [userId],
      );
      return Number(found[0]?.balance ?? 0);
    },
    ledgerRows: async () => {
      const [found] = await pool().query<RowDataPacket[]>(`SELECT COUNT(*) AS n FROM \`${table}\``);
      return Number(found[0]?.n);
    },
    close: async () => {
      await dropLedgerTables(pool(), table);
      await pool().query(`DROP TABLE IF EXISTS \`${points}\`, \`${table}_processed\``);
    },
  };
}

describePaymentToPoints('a MariaDB ledger', openWorld, { skip: !service.available });

describe.skipIf(!service.available)(
  'payment-to-points on a MariaDB ledger under concurrency and batches',
  () => {
    let world: Awaited<ReturnType<typeof openWorld>>;
    let table: string;
    let ledger: MysqlLedger<PoolConnection>;

    beforeEach(async () => {
      world = await openWorld();
      table = world.table;
      ledger = world.ledger;
    });

    afterEach(async () => {
      await world.close();
    });

    const addPoints = (conn: PoolConnection, userId: string, amount: number) =>
      world.addPoints(conn, userId, amount);
    const balance = (userId: string) => world.balance(userId);
    const ledgerRows = () => world.ledgerRows();

    it('applies the effect once for 50 concurrent duplicate deliveries over separate pool connections', async () => {
      let executions = 0;
      const pipeline = createPipeline<PoolConnection, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          executions++;
          await addPoints(ctx.tx, message.userId, 100);
          await sleep(20); // hold the transaction open so the copies pile up on the row lock
        },
      });
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, i) => pipeline.process(paymentEnvelope(event, `copy-${i % 3}`))),
      );
      const kinds = outcomes.map((o) => o.kind);
      expect(executions).toBe(1);
      expect(kinds.filter((k) => k === 'executed')).toHaveLength(1);
      expect(kinds.filter((k) => k === 'duplicate')).toHaveLength(49);
      expect(await balance('user-1')).toBe(100);
      expect(await ledgerRows()).toBe(1);
    });

    it('runs a leased handler once for 20 concurrent deliveries; the rest are busy or duplicate', async () => {
      let executions = 0;
      const pipeline = createPipeline({
        ledger,
        group: 'points',
        mode: 'leased',
        key: { jsonPath: 'eventId' },
        handler: async () => {
          executions++;
          await sleep(50);
        },
      });
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) => pipeline.process(paymentEnvelope(event, `copy-${i % 2}`))),
      );
      expect(executions).toBe(1);
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(1);
      expect(outcomes.every((o) => ['executed', 'busy', 'duplicate'].includes(o.kind))).toBe(true);
    });

    it('claims a batch in one transaction: 60 new events executed once, 40 copies in the same batch and 10 later ones duplicates', async () => {
      let calls = 0;
      const pipeline = createPipeline<PoolConnection, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          calls++;
          await addPoints(ctx.tx, message.userId, 100);
        },
      });
      const many = vi.spyOn(ledger, 'transactionMany');
      const single = vi.spyOn(ledger, 'transaction');
      const distinct = Array.from({ length: 60 }, (_, i) => ({
        ...event,
        eventId: `batch-${i}`,
        userId: `user-${i % 7}`,
      }));
      const batch = [...distinct, ...distinct.slice(0, 40)].map((e, i) => paymentEnvelope(e, `b-${i}`));
      const outcomes = await pipeline.processBatch(batch);
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(60);
      expect(outcomes.slice(60).every((o) => o.kind === 'duplicate' && o.source === 'republish')).toBe(true);
      expect(calls).toBe(60);
      expect(many).toHaveBeenCalledTimes(1);
      expect(single).not.toHaveBeenCalled();
      expect(await ledgerRows()).toBe(60);
      let total = 0;
      for (let u = 0; u < 7; u++) total += await balance(`user-${u}`);
      expect(total).toBe(6000);
      expect((await pipeline.processBatch(batch.slice(0, 10))).every((o) => o.kind === 'duplicate')).toBe(
        true,
      );
    });

    it('a naive check-then-insert consumer double-applies under the same concurrent deliveries', async () => {
      const processed = `${table}_processed`;
      await pool().query(`CREATE TABLE \`${processed}\` (event_id VARCHAR(64) PRIMARY KEY) ENGINE = InnoDB`);
      const naive = async (): Promise<void> => {
        const [seen] = await pool().execute<RowDataPacket[]>(
          `SELECT 1 FROM \`${processed}\` WHERE event_id = ?`,
          [event.eventId],
        );
        if (seen.length > 0) return;
        await sleep(20);
        await pool().execute(`INSERT IGNORE INTO \`${processed}\` (event_id) VALUES (?)`, [event.eventId]);
        await world.write(pool(), event.userId, 100);
      };
      await Promise.all(Array.from({ length: 20 }, naive));
      expect(await balance('user-1')).toBeGreaterThan(100);
    });
  },
);
