import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach } from 'vitest';
import { createEnvelope, type ClaimRequest, type Envelope } from 'oncemq';

/** The payment-to-points example: a `payment-succeeded` event adds 100 points to the order's user. */
export interface PaymentSucceeded {
  eventId: string;
  orderId: string;
  userId: string;
  amount: number;
}

export function paymentEnvelope(
  event: PaymentSucceeded,
  brokerId = `broker-${event.eventId}`,
  deliveryCount = 1,
): Envelope {
  return createEnvelope({ brokerId, topic: 'payments', body: event, deliveryCount });
}

/** A claim request of group `points` for `key`, without a payload fingerprint; the broker id is the key. */
export function pointsRequest(key: string, leaseMs = 30_000): ClaimRequest {
  return { group: 'points', key, fingerprint: null, brokerId: key, topic: 'payments', leaseMs };
}

/** Payment `evt-<index>` of user `user-<index % 3>`, 100 points. */
export function payment(index: number): PaymentSucceeded {
  return { eventId: `evt-${index}`, orderId: `order-${index}`, userId: `user-${index % 3}`, amount: 100 };
}

/** `n` payments `${prefix}-0`.. spread over seven users (`user-0`..`user-6`), 100 points each. */
export function paymentEvents(n: number, prefix = 'evt'): PaymentSucceeded[] {
  return Array.from({ length: n }, (_, i) => ({
    eventId: `${prefix}-${i}`,
    orderId: `order-${i}`,
    userId: `user-${i % 7}`,
    amount: 100,
  }));
}

/** A scratch directory removed by the returned function. */
export function scratchDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'oncemq-test-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A path named `file` in a scratch directory made before each test of the calling describe block
 * and removed after it (after the block's own after-hooks); read `path` inside a test.
 */
export function scratchFileEachTest(file: string): { readonly path: string } {
  let scratch: ReturnType<typeof scratchDir> | undefined;
  let path = '';
  beforeEach(() => {
    scratch = scratchDir();
    path = join(scratch.dir, file);
  });
  afterEach(() => {
    scratch?.remove();
  });
  return {
    get path() {
      return path;
    },
  };
}

/** Opens a points database at `path` the way an application would (WAL, busy timeout). */
export function openPointsDb(path: string): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.exec('CREATE TABLE IF NOT EXISTS points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
  return db;
}

export function addPoints(db: Database.Database, userId: string, amount: number): void {
  db.prepare(
    'INSERT INTO points (user_id, balance) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET balance = balance + excluded.balance',
  ).run(userId, amount);
}

export function balance(db: Database.Database, userId: string): number {
  const row = db.prepare('SELECT balance FROM points WHERE user_id = ?').get(userId) as
    { balance: number } | undefined;
  return row?.balance ?? 0;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
