import { describe, expect, it } from 'vitest';
import type { ClaimRequest, Ledger, LedgerCapabilities } from '../ledger/ledger.js';
import {
  conformanceRequest,
  withNamespace,
  wonClaim,
  type LedgerConformanceFactory,
  type LedgerNamespace,
} from './ledger-conformance-fixture.js';

/** Leaves a SUCCESS row for `request`, through whichever mode the ledger has. */
async function succeed(ledger: Ledger, caps: LedgerCapabilities, request: ClaimRequest): Promise<void> {
  if (caps.leased) await ledger.complete(wonClaim(await ledger.claim(request)), null);
  else await ledger.transaction(request, () => null);
}

/** Leaves a FAIL row for `request`. */
async function failOnce(ledger: Ledger, caps: LedgerCapabilities, request: ClaimRequest): Promise<void> {
  if (caps.leased) await ledger.fail(wonClaim(await ledger.claim(request)), 'failed on purpose');
  else await ledger.recordFailure(request, 'failed on purpose');
}

/** Purge, listing, reset and the maintenance lock. */
export function describeLedgerMaintenance<Tx>(
  factory: LedgerConformanceFactory<Tx>,
  caps: LedgerCapabilities,
): void {
  const run = (body: (namespace: LedgerNamespace<Tx>) => Promise<void>) => () => withNamespace(factory, body);
  const t0 = 1_700_000_000_000;

  describe('purge', () => {
    it.skipIf(!caps.purge || !caps.leased)(
      'deletes finished rows older than the cut-off in bounded batches and never a PROCESSING row, even one past its lease',
      run(async (ns) => {
        let now = t0;
        const ledger = await ns.open({ clock: () => now });
        const group = 'purge';
        for (let i = 0; i < 22; i++) await succeed(ledger, caps, conformanceRequest({ group }));
        for (let i = 0; i < 3; i++) await failOnce(ledger, caps, conformanceRequest({ group }));
        const live = conformanceRequest({ group, leaseMs: 1 });
        wonClaim(await ledger.claim(live));
        now = t0 + 60_000;
        const recent = conformanceRequest({ group });
        await succeed(ledger, caps, recent);

        const result = await ledger.purge({ olderThan: new Date(t0 + 1000), batchSize: 10 });
        expect(result).toEqual({ deleted: 25, batches: 3 });
        expect(await ledger.get(group, live.key)).toMatchObject({ status: 'PROCESSING' });
        expect(await ledger.get(group, recent.key)).toMatchObject({ status: 'SUCCESS' });
        expect(await ledger.purge({ olderThan: new Date(t0 + 1000), batchSize: 10 })).toEqual({
          deleted: 0,
          batches: 1,
        });
      }),
    );

    it.skipIf(!caps.purge || !caps.leased)(
      'stops after maxBatches and leaves the rest for the next run',
      run(async (ns) => {
        const ledger = await ns.open({ clock: () => t0 });
        for (let i = 0; i < 7; i++) await succeed(ledger, caps, conformanceRequest({ group: 'purge-max' }));
        expect(await ledger.purge({ olderThan: new Date(t0 + 1), batchSize: 3, maxBatches: 1 })).toEqual({
          deleted: 3,
          batches: 1,
        });
        expect(await ledger.purge({ olderThan: new Date(t0 + 1), batchSize: 3 })).toEqual({
          deleted: 4,
          batches: 2,
        });
      }),
    );
  });

  describe('inspection', () => {
    it.skipIf(!caps.inspect || !caps.leased)(
      'lists stuck PROCESSING rows past their lease and FAIL rows with their remark, oldest update first',
      run(async (ns) => {
        let now = t0;
        const ledger = await ns.open({ clock: () => now });
        const group = 'inspect';
        const stuck = conformanceRequest({ group, leaseMs: 1000 });
        wonClaim(await ledger.claim(stuck));
        now += 10;
        const running = conformanceRequest({ group, leaseMs: 3_600_000 });
        wonClaim(await ledger.claim(running));
        now += 10;
        const failed = conformanceRequest({ group });
        await failOnce(ledger, caps, failed);
        await succeed(ledger, caps, conformanceRequest({ group }));
        await succeed(ledger, caps, conformanceRequest({ group: 'inspect-other' }));
        now += 5000;

        const list = ledger.list.bind(ledger);
        const stuckRows = await list({ group, status: 'PROCESSING', leaseExpiredBefore: new Date(now) });
        expect(stuckRows.map((r) => r.key)).toEqual([stuck.key]);
        const failedRows = await list({ group, status: 'FAIL' });
        expect(failedRows).toMatchObject([{ key: failed.key, remark: 'failed on purpose' }]);
        const all = await list({ group });
        expect(all).toHaveLength(4);
        expect(all[0]?.key).toBe(stuck.key);
        expect(await list({ group, limit: 2 })).toHaveLength(2);
      }),
    );

    it.skipIf(!caps.inspect || !caps.leased)(
      'reset deletes a stuck or failed row, keeps a SUCCESS row unless forced, and says whether it deleted',
      run(async (ns) => {
        const ledger = await ns.open();
        const reset = ledger.reset.bind(ledger);
        const stuck = conformanceRequest();
        wonClaim(await ledger.claim(stuck));
        const failed = conformanceRequest();
        await failOnce(ledger, caps, failed);
        const done = conformanceRequest();
        await succeed(ledger, caps, done);

        expect(await reset(stuck.group, stuck.key)).toBe(true);
        expect(await ledger.get(stuck.group, stuck.key)).toBeUndefined();
        expect(await reset(failed.group, failed.key)).toBe(true);
        expect(await reset(done.group, done.key)).toBe(false);
        expect(await ledger.get(done.group, done.key)).toMatchObject({ status: 'SUCCESS' });
        expect(await reset(done.group, done.key, { force: true })).toBe(true);
        expect(await reset(done.group, 'never-seen')).toBe(false);
        expect((await ledger.claim(stuck)).status).toBe('acquired');
      }),
    );

    it.skipIf(!caps.maintenanceLock || !caps.concurrentConnections)(
      'the maintenance lock is held by one instance at a time and is free again after release',
      run(async (ns) => {
        const [a, b] = [await ns.open(), await ns.open()];
        const held = await a.tryMaintenanceLock();
        expect(held).toBeDefined();
        expect(await b.tryMaintenanceLock()).toBeUndefined();
        await held?.release();
        const next = await b.tryMaintenanceLock();
        expect(next).toBeDefined();
        expect(await a.tryMaintenanceLock()).toBeUndefined();
        await next?.release();
      }),
    );
  });
}
