import { describe, expect, it } from 'vitest';
import { LeaseLostError } from '../core/errors.js';
import type { ClaimRequest, ClaimResult } from '../ledger/ledger.js';
import {
  applyThen,
  conformanceRequest,
  gate,
  withNamespace,
  wonClaim,
  type LedgerConformanceFactory,
  type LedgerNamespace,
} from './ledger-conformance-fixture.js';
import { describeLedgerHostileInput } from './ledger-conformance-hostile.js';
import { describeLedgerMaintenance } from './ledger-conformance-maintenance.js';

/**
 * The ledger conformance suite: every ledger calls it with a short spec, so that all backends answer
 * alike. Cases are named by behaviour and skipped by capability, never by backend name.
 */
export function describeLedgerConformance<Tx>(name: string, factory: LedgerConformanceFactory<Tx>): void {
  const caps = factory.capabilities;
  const run = (body: (namespace: LedgerNamespace<Tx>) => Promise<void>) => () => withNamespace(factory, body);
  const connections = factory.raceConnections ?? 8;

  describe(`ledger conformance: ${name}`, () => {
    describe('claims', () => {
      it(
        'every instance declares the capabilities the suite was declared with',
        run(async (ns) => {
          const ledger = await ns.open();
          expect(ledger.capabilities).toEqual(caps);
        }),
      );

      it.skipIf(!caps.transactional)(
        'the first transactional claim of a key acquires attempt 1 and commits a SUCCESS row',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          const result = await ledger.transaction(request, () => null);
          expect(result).toMatchObject({ status: 'acquired', claim: { key: request.key, attempt: 1 } });
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'SUCCESS',
            attempt: 1,
            brokerId: request.brokerId,
            topic: request.topic,
            fingerprint: request.fingerprint,
          });
        }),
      );

      it.skipIf(!caps.leased)(
        'the first leased claim of a key acquires a PROCESSING row with an owner and a running lease',
        run(async (ns) => {
          const now = 1_700_000_000_000;
          const ledger = await ns.open({ clock: () => now });
          const request = conformanceRequest();
          const claim = wonClaim(await ledger.claim(request));
          expect(claim).toMatchObject({ key: request.key, attempt: 1 });
          expect(claim.leaseUntil.getTime()).toBe(now + request.leaseMs);
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'PROCESSING',
            owner: claim.owner,
            attempt: 1,
          });
        }),
      );

      it.skipIf(!caps.transactional)(
        'a second claim of a committed key is a duplicate that names the broker id of the first copy',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          await ledger.transaction(request, () => null);
          const again = await ledger.transaction({ ...request, brokerId: 'other-copy' }, () => {
            throw new Error('work must not run for a duplicate');
          });
          expect(again).toMatchObject({ status: 'duplicate', record: { brokerId: request.brokerId } });
        }),
      );

      it.skipIf(!caps.transactional)(
        'work that throws rolls back the claim and its effect, and the key is free again',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          await expect(
            ledger.transaction(request, async (tx) => {
              await ns.effect?.apply(tx, request.key);
              throw new Error('handler crashed after its write');
            }),
          ).rejects.toThrow('handler crashed after its write');
          expect(await ledger.get(request.group, request.key)).toBeUndefined();
          if (ns.effect) expect(await ns.effect.count(request.key)).toBe(0);
          const retried = await ledger.transaction(request, async (tx) => {
            await ns.effect?.apply(tx, request.key);
            return null;
          });
          expect(retried.status).toBe('acquired');
          if (ns.effect) expect(await ns.effect.count(request.key)).toBe(1);
        }),
      );

      it.skipIf(!caps.transactional)(
        'stores the result of the work and replays it to a duplicate',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          await ledger.transaction(request, () => '{"credited":100}');
          const again = await ledger.transaction(request, () => null);
          expect(again).toMatchObject({ status: 'duplicate', record: { result: '{"credited":100}' } });
        }),
      );

      it.skipIf(!caps.transactional)(
        'recordFailure after a rollback leaves a FAIL row with the remark, and the next claim reclaims it with attempt 2',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          await ledger.recordFailure(request, 'downstream timed out');
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'FAIL',
            attempt: 1,
            remark: 'downstream timed out',
          });
          await ledger.recordFailure(request, 'timed out again');
          expect(await ledger.get(request.group, request.key)).toMatchObject({ status: 'FAIL', attempt: 2 });
          const result = await ledger.transaction(request, () => null);
          expect(result).toMatchObject({
            status: 'reclaimed',
            claim: { attempt: 3 },
            previous: { status: 'FAIL' },
          });
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'SUCCESS',
            attempt: 3,
          });
        }),
      );

      it.skipIf(!caps.transactional)(
        'recordFailure never overwrites a key that succeeded meanwhile',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          await ledger.transaction(request, () => null);
          await ledger.recordFailure(request, 'late failure report');
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'SUCCESS',
            remark: null,
          });
        }),
      );

      it(
        'a copy with a different payload fingerprint is a conflict; a null fingerprint never conflicts',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          if (caps.transactional) await ledger.transaction(request, () => null);
          else wonClaim(await ledger.claim(request));
          const reused = { ...request, fingerprint: 'fp-other' };
          const claimAgain = (r: ClaimRequest): Promise<ClaimResult> =>
            caps.transactional ? ledger.transaction(r, () => null) : ledger.claim(r);
          expect(await claimAgain(reused)).toMatchObject({
            status: 'conflict',
            record: { fingerprint: 'fp-1' },
          });
          expect((await claimAgain({ ...request, fingerprint: null })).status).not.toBe('conflict');
        }),
      );
    });

    describe('races', () => {
      it.skipIf(!caps.transactional || !caps.concurrentConnections)(
        `${connections} parallel transactional claims of one key on ${connections} connections give exactly one winner and one effect`,
        run(async (ns) => {
          const ledgers = await Promise.all(Array.from({ length: connections }, () => ns.open()));
          const request = conformanceRequest();
          let runs = 0;
          const results = await Promise.all(
            ledgers.map((ledger, i) =>
              ledger.transaction({ ...request, brokerId: `copy-${i}` }, (tx) => {
                runs++;
                return applyThen(ns, tx, [request.key], null);
              }),
            ),
          );
          expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
          expect(results.filter((r) => r.status === 'duplicate')).toHaveLength(connections - 1);
          expect(runs).toBe(1);
          if (ns.effect) expect(await ns.effect.count(request.key)).toBe(1);
        }),
      );

      it.skipIf(!caps.leased || !caps.concurrentConnections)(
        `${connections} parallel leased claims of one key on ${connections} connections give exactly one owner; the rest are busy`,
        run(async (ns) => {
          const ledgers = await Promise.all(Array.from({ length: connections }, () => ns.open()));
          const request = conformanceRequest();
          const results = await Promise.all(ledgers.map((ledger) => ledger.claim(request)));
          expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
          expect(results.filter((r) => r.status === 'busy')).toHaveLength(connections - 1);
        }),
      );

      const inflight =
        caps.transactional && caps.concurrentConnections && factory.waitsForInflightTransactions !== false;

      it.skipIf(!inflight)(
        'a concurrent claim waits for an in-flight transaction on the same key, then sees a duplicate',
        run(async (ns) => {
          const [a, b] = [await ns.open(), await ns.open()];
          const request = conformanceRequest();
          const hold = gate();
          const entered = gate();
          const first = a.transaction(request, async () => {
            entered.open();
            await hold.promise;
            return null;
          });
          await entered.promise;
          let settled = false;
          const second = b
            .transaction({ ...request, brokerId: 'second' }, () => null)
            .finally(() => {
              settled = true;
            });
          await new Promise((resolve) => setTimeout(resolve, 100));
          expect(settled).toBe(false);
          hold.open();
          expect((await first).status).toBe('acquired');
          expect(await second).toMatchObject({ status: 'duplicate', record: { brokerId: request.brokerId } });
        }),
      );

      it.skipIf(!inflight)(
        'a concurrent claim waits for an in-flight transaction that then rolls back, and acquires',
        run(async (ns) => {
          const [a, b] = [await ns.open(), await ns.open()];
          const request = conformanceRequest();
          const hold = gate();
          const entered = gate();
          const first = a.transaction(request, async () => {
            entered.open();
            await hold.promise;
            throw new Error('first delivery crashed');
          });
          await entered.promise;
          const second = b.transaction({ ...request, brokerId: 'second' }, () => null);
          hold.open();
          await expect(first).rejects.toThrow('first delivery crashed');
          expect((await second).status).toBe('acquired');
          expect(await b.get(request.group, request.key)).toMatchObject({
            status: 'SUCCESS',
            brokerId: 'second',
          });
        }),
      );
    });

    describe('leases', () => {
      it.skipIf(!caps.leased)(
        'a running lease makes another claim busy; once expired the key is reclaimed with attempt 2',
        run(async (ns) => {
          let now = 1_700_000_000_000;
          const ledger = await ns.open({ clock: () => now });
          const request = conformanceRequest();
          const first = wonClaim(await ledger.claim(request));
          now += request.leaseMs - 1;
          expect(await ledger.claim({ ...request, brokerId: 'b2' })).toMatchObject({ status: 'busy' });
          now += 2;
          const second = await ledger.claim({ ...request, brokerId: 'b2' });
          expect(second).toMatchObject({
            status: 'reclaimed',
            claim: { attempt: 2 },
            previous: { status: 'PROCESSING', owner: first.owner, attempt: 1 },
          });
          expect(wonClaim(second).owner).not.toBe(first.owner);
        }),
      );

      it.skipIf(!caps.leased)(
        'renew extends the lease of the owner, so the key stays busy past the first deadline',
        run(async (ns) => {
          let now = 1_700_000_000_000;
          const ledger = await ns.open({ clock: () => now });
          const request = conformanceRequest();
          const claim = wonClaim(await ledger.claim(request));
          now += request.leaseMs - 1000;
          const renewed = await ledger.renew(claim, request.leaseMs);
          expect(renewed.leaseUntil.getTime()).toBe(now + request.leaseMs);
          now += 2000;
          expect((await ledger.claim(request)).status).toBe('busy');
        }),
      );

      it.skipIf(!caps.leased)(
        'a stale owner gets LeaseLostError on renew, complete, fail and release, and never touches the new owner’s row',
        run(async (ns) => {
          let now = 1_700_000_000_000;
          const ledger = await ns.open({ clock: () => now });
          const request = conformanceRequest();
          const stale = wonClaim(await ledger.claim(request));
          now += request.leaseMs + 1;
          const fresh = wonClaim(await ledger.claim(request));
          await expect(ledger.renew(stale, 1000)).rejects.toBeInstanceOf(LeaseLostError);
          await expect(ledger.complete(stale, '"stale"')).rejects.toBeInstanceOf(LeaseLostError);
          await expect(ledger.fail(stale, 'stale')).rejects.toBeInstanceOf(LeaseLostError);
          await expect(ledger.release(stale)).rejects.toBeInstanceOf(LeaseLostError);
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'PROCESSING',
            owner: fresh.owner,
            attempt: 2,
            result: null,
          });
          await ledger.complete(fresh, '"done"');
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'SUCCESS',
            result: '"done"',
          });
          await expect(ledger.complete(fresh, '"again"')).rejects.toBeInstanceOf(LeaseLostError);
        }),
      );

      it.skipIf(!caps.leased)(
        'a wrong owner token with the right attempt is refused (a rejected duplicate cannot unlock a running original)',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          const claim = wonClaim(await ledger.claim(request));
          const impostor = { ...claim, owner: 'someone-else' };
          await expect(ledger.release(impostor)).rejects.toBeInstanceOf(LeaseLostError);
          await expect(ledger.complete(impostor, null)).rejects.toBeInstanceOf(LeaseLostError);
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'PROCESSING',
            owner: claim.owner,
          });
        }),
      );

      it.skipIf(!caps.leased)(
        'complete stores the result and later claims are duplicates replaying it',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          await ledger.complete(wonClaim(await ledger.claim(request)), '{"sent":true}');
          expect(await ledger.claim({ ...request, brokerId: 'again' })).toMatchObject({
            status: 'duplicate',
            record: { result: '{"sent":true}', brokerId: request.brokerId },
          });
        }),
      );

      it.skipIf(!caps.leased)(
        'fail keeps a FAIL row with the remark, and the next claim reclaims it with attempt 2',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          await ledger.fail(wonClaim(await ledger.claim(request)), 'smtp refused');
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'FAIL',
            remark: 'smtp refused',
          });
          expect(await ledger.claim(request)).toMatchObject({ status: 'reclaimed', claim: { attempt: 2 } });
        }),
      );

      it.skipIf(!caps.leased)(
        'release deletes the row so the next claim acquires afresh',
        run(async (ns) => {
          const ledger = await ns.open();
          const request = conformanceRequest();
          await ledger.release(wonClaim(await ledger.claim(request)));
          expect(await ledger.get(request.group, request.key)).toBeUndefined();
          expect(await ledger.claim(request)).toMatchObject({ status: 'acquired', claim: { attempt: 1 } });
        }),
      );
    });

    describeLedgerMaintenance(factory, caps);
    describeLedgerHostileInput(factory, caps);
  });
}
