import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MysqlLedger } from 'oncemq/mysql';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';
import { payment } from '../support/points.js';
import {
  describePaymentToPoints,
  expectBatchClaimedTogether,
  expectConcurrentCopiesAppliedOnce,
  expectLeasedCopiesRunOnce,
  type PointsWorld,
} from '../support/points-scenario.js';

const service = await mysqlService();
const event = payment(1);

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

    beforeEach(async () => {
      world = await openWorld();
    });

    afterEach(async () => {
      await world.close();
    });

    it('applies the effect once for 50 concurrent duplicate deliveries over separate pool connections', async () => {
      await expectConcurrentCopiesAppliedOnce(world, world.ledger, 20);
    });

    it('runs a leased handler once for 20 concurrent deliveries; the rest are busy or duplicate', async () => {
      await expectLeasedCopiesRunOnce(Array.from({ length: 20 }, () => world.ledger));
    });

    it('claims a batch in one transaction: 60 new events executed once, 40 copies in the same batch and 10 later ones duplicates', async () => {
      await expectBatchClaimedTogether(world);
    });

    it('a naive check-then-insert consumer double-applies under the same concurrent deliveries', async () => {
      const processed = `${world.table}_processed`;
      await pool().query(`CREATE TABLE \`${processed}\` (event_id VARCHAR(64) PRIMARY KEY) ENGINE = InnoDB`);
      // Every copy checks before any inserts: the window a loaded pool may or may not open by itself.
      const copies = 20;
      let checked = 0;
      let allChecked!: () => void;
      const barrier = new Promise<void>((resolve) => (allChecked = resolve));
      const naive = async (): Promise<void> => {
        const [seen] = await pool().execute<RowDataPacket[]>(
          `SELECT 1 FROM \`${processed}\` WHERE event_id = ?`,
          [event.eventId],
        );
        if (++checked === copies) allChecked();
        await barrier;
        if (seen.length > 0) return;
        await pool().execute(`INSERT IGNORE INTO \`${processed}\` (event_id) VALUES (?)`, [event.eventId]);
        await world.write(pool(), event.userId, 100);
      };
      await Promise.all(Array.from({ length: copies }, naive));
      expect(await world.balance('user-1')).toBeGreaterThan(100);
    });
  },
);
