import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LeaseLostError, type ClaimRequest } from 'oncemq';
import { describe, expect, it } from 'vitest';
import { auditedLedger, CREATE_AUDIT, leasedAudit, openDemoStore } from '../support/internal.js';
import { findPostgres } from '../support/postgres.js';

const postgres = await findPostgres();

/** A claim request of the run's group for `key` with a lease of `leaseMs`. */
function request(key: string, leaseMs: number): ClaimRequest {
  return { group: 'points', key, fingerprint: null, brokerId: `${key}-copy`, topic: 'payments', leaseMs };
}

describe.skipIf(!postgres.available)('the audit of a leased chaos run (PostgreSQL)', () => {
  it('records a takeover and a refused stale completion, and finds no stale completion accepted', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'oncemq-audit-'));
    const store = await openDemoStore('postgres', { dir, connections: 4, url: postgres.url });
    try {
      const sql = store.sql;
      const table = store.ledgerTable;
      if (sql === undefined || table === undefined) throw new Error('a server store has sql and ledgerTable');
      await sql(CREATE_AUDIT);
      const cut = auditedLedger(store.ledger, sql, 'member-0');
      const other = auditedLedger(store.ledger, sql, 'member-1');
      // evt-0: one owner, completed
      const plain = await cut.claim(request('evt-0', 30_000));
      if (plain.status !== 'acquired') throw new Error(`expected a first claim, got ${plain.status}`);
      await cut.complete(plain.claim, null);
      // evt-1: the first owner's lease runs out, the other member takes the key over and completes
      const first = await cut.claim(request('evt-1', 1));
      if (first.status !== 'acquired') throw new Error(`expected a first claim, got ${first.status}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
      const takeover = await other.claim(request('evt-1', 30_000));
      expect(takeover.status).toBe('reclaimed');
      if (takeover.status !== 'reclaimed') return;
      await other.complete(takeover.claim, null);
      // the first owner comes back and completes: refused
      await expect(cut.complete(first.claim, null)).rejects.toBeInstanceOf(LeaseLostError);
      const audit = await leasedAudit(sql, table);
      expect(audit).toMatchObject({ takeovers: 1, staleCompletesRefused: 1, staleCompletesAccepted: 0 });

      // a completion the ledger accepted from the first owner (as a ledger without the owner check
      // would) is a stale completion accepted
      await sql(`INSERT INTO chaos_audit (msg_key, attempt, owner, member, kind) VALUES (?, ?, ?, ?, ?)`, [
        'evt-1',
        first.claim.attempt,
        first.claim.owner,
        'member-0',
        'complete',
      ]);
      const stale = await leasedAudit(sql, table);
      expect(stale).toMatchObject({ staleCompletesAccepted: 1, staleKeys: ['evt-1'] });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
