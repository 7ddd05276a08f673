import { describe, expect, it } from 'vitest';
import { LeaseLostError } from '../core/errors.js';
import type { ClaimRequest, ClaimResult, Ledger } from '../ledger/ledger.js';
import {
  applyThen,
  gate,
  ledgerCases,
  wonClaim,
  type LedgerConformanceFactory,
} from './ledger-conformance-fixture.js';
import { describeLedgerBatchClaims } from './ledger-conformance-batch.js';
import { describeLedgerHostileInput } from './ledger-conformance-hostile.js';
import { describeLedgerLifecycle } from './ledger-conformance-lifecycle.js';
import { describeLedgerLimits } from './ledger-conformance-limits.js';
import { describeLedgerMaintenance } from './ledger-conformance-maintenance.js';

/** A transaction held open inside its work until `finish`; `result` settles after that. */
interface HeldTransaction {
  readonly result: Promise<ClaimResult>;
  finish(): void;
}

/**
 * Starts a transactional claim of `request` whose work waits for `finish()` and then runs `then`;
 * resolves once the work is running, that is, while the transaction holds the key.
 */
async function holdTransaction<Tx>(
  ledger: Ledger<Tx>,
  request: ClaimRequest,
  then: () => string | null,
): Promise<HeldTransaction> {
  const hold = gate();
  const entered = gate();
  const result = ledger.transaction(request, async () => {
    entered.open();
    await hold.promise;
    return then();
  });
  await entered.promise;
  return { result, finish: hold.open };
}

/**
 * The ledger conformance suite: every ledger calls it with a short spec, so that all backends answer
 * alike. Cases are named by behaviour and skipped by capability, never by backend name.
 */
export function describeLedgerConformance<Tx>(name: string, factory: LedgerConformanceFactory<Tx>): void {
  const caps = factory.capabilities;
  const { oneLedger, oneLedgerOnClock, twoLedgers, ledgers } = ledgerCases(factory);
  const connections = factory.raceConnections ?? 8;
  const transactional = it.skipIf(!caps.transactional);
  const leased = it.skipIf(!caps.leased);

  describe(`ledger conformance: ${name}`, () => {
    describe('claims', () => {
      it(
        'every instance declares the capabilities the suite was declared with',
        oneLedger(({ ledger }) => {
          expect(ledger.capabilities).toEqual(caps);
        }),
      );

      transactional(
        'the first transactional claim of a key acquires attempt 1 and commits a SUCCESS row',
        oneLedger(async ({ ledger, request }) => {
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

      leased(
        'the first leased claim of a key acquires a PROCESSING row with an owner and a running lease',
        oneLedgerOnClock(async ({ ledger, request, clock }) => {
          const claim = wonClaim(await ledger.claim(request));
          expect(claim).toMatchObject({ key: request.key, attempt: 1 });
          expect(claim.leaseUntil.getTime()).toBe(clock.now + request.leaseMs);
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'PROCESSING',
            owner: claim.owner,
            attempt: 1,
          });
        }),
      );

      transactional(
        'a second claim of a committed key is a duplicate that names the broker id of the first copy',
        oneLedger(async ({ ledger, request }) => {
          await ledger.transaction(request, () => null);
          const again = await ledger.transaction({ ...request, brokerId: 'other-copy' }, () => {
            throw new Error('work must not run for a duplicate');
          });
          expect(again).toMatchObject({ status: 'duplicate', record: { brokerId: request.brokerId } });
        }),
      );

      transactional(
        'work that throws rolls back the claim and its effect, and the key is free again',
        oneLedger(async ({ ns, ledger, request }) => {
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

      transactional(
        'stores the result of the work and replays it to a duplicate',
        oneLedger(async ({ ledger, request }) => {
          await ledger.transaction(request, () => '{"credited":100}');
          const again = await ledger.transaction(request, () => null);
          expect(again).toMatchObject({ status: 'duplicate', record: { result: '{"credited":100}' } });
        }),
      );

      transactional(
        'recordFailure after a rollback leaves a FAIL row with the remark, and the next claim reclaims it with attempt 2',
        oneLedger(async ({ ledger, request }) => {
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

      transactional(
        'recordFailure never overwrites a key that succeeded meanwhile',
        oneLedger(async ({ ledger, request }) => {
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
        oneLedger(async ({ ledger, request }) => {
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
        ledgers(connections, async ({ ns, ledgers, request }) => {
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
        ledgers(connections, async ({ ledgers, request }) => {
          const results = await Promise.all(ledgers.map((ledger) => ledger.claim(request)));
          expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
          expect(results.filter((r) => r.status === 'busy')).toHaveLength(connections - 1);
        }),
      );

      const inflight = it.skipIf(
        !caps.transactional || !caps.concurrentConnections || factory.waitsForInflightTransactions === false,
      );

      inflight(
        'a concurrent claim waits for an in-flight transaction on the same key, then sees a duplicate',
        twoLedgers(async ({ a, b, request }) => {
          const first = await holdTransaction(a, request, () => null);
          let settled = false;
          const second = b
            .transaction({ ...request, brokerId: 'second' }, () => null)
            .finally(() => {
              settled = true;
            });
          await new Promise((resolve) => setTimeout(resolve, 100));
          expect(settled).toBe(false);
          first.finish();
          expect((await first.result).status).toBe('acquired');
          expect(await second).toMatchObject({ status: 'duplicate', record: { brokerId: request.brokerId } });
        }),
      );

      inflight(
        'a concurrent claim waits for an in-flight transaction that then rolls back, and acquires',
        twoLedgers(async ({ a, b, request }) => {
          const first = await holdTransaction(a, request, () => {
            throw new Error('first delivery crashed');
          });
          const second = b.transaction({ ...request, brokerId: 'second' }, () => null);
          first.finish();
          await expect(first.result).rejects.toThrow('first delivery crashed');
          expect((await second).status).toBe('acquired');
          expect(await b.get(request.group, request.key)).toMatchObject({
            status: 'SUCCESS',
            brokerId: 'second',
          });
        }),
      );
    });

    describe('leases', () => {
      leased(
        'a running lease makes another claim busy; once expired the key is reclaimed with attempt 2',
        oneLedgerOnClock(async ({ ledger, request, clock }) => {
          const first = wonClaim(await ledger.claim(request));
          clock.advance(request.leaseMs - 1);
          expect(await ledger.claim({ ...request, brokerId: 'b2' })).toMatchObject({ status: 'busy' });
          clock.advance(2);
          const second = await ledger.claim({ ...request, brokerId: 'b2' });
          expect(second).toMatchObject({
            status: 'reclaimed',
            claim: { attempt: 2 },
            previous: { status: 'PROCESSING', owner: first.owner, attempt: 1 },
          });
          expect(wonClaim(second).owner).not.toBe(first.owner);
        }),
      );

      leased(
        'renew extends the lease of the owner, so the key stays busy past the first deadline',
        oneLedgerOnClock(async ({ ledger, request, clock }) => {
          const claim = wonClaim(await ledger.claim(request));
          clock.advance(request.leaseMs - 1000);
          const renewed = await ledger.renew(claim, request.leaseMs);
          expect(renewed.leaseUntil.getTime()).toBe(clock.now + request.leaseMs);
          clock.advance(2000);
          expect((await ledger.claim(request)).status).toBe('busy');
        }),
      );

      leased(
        'a stale owner gets LeaseLostError on renew, complete, fail and release, and never touches the new owner’s row',
        oneLedgerOnClock(async ({ ledger, request, clock }) => {
          const stale = wonClaim(await ledger.claim(request));
          clock.advance(request.leaseMs + 1);
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

      leased(
        'a wrong owner token with the right attempt is refused (a rejected duplicate cannot unlock a running original)',
        oneLedger(async ({ ledger, request }) => {
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

      leased(
        'complete stores the result and later claims are duplicates replaying it',
        oneLedger(async ({ ledger, request }) => {
          await ledger.complete(wonClaim(await ledger.claim(request)), '{"sent":true}');
          expect(await ledger.claim({ ...request, brokerId: 'again' })).toMatchObject({
            status: 'duplicate',
            record: { result: '{"sent":true}', brokerId: request.brokerId },
          });
        }),
      );

      leased(
        'fail keeps a FAIL row with the remark, and the next claim reclaims it with attempt 2',
        oneLedger(async ({ ledger, request }) => {
          await ledger.fail(wonClaim(await ledger.claim(request)), 'smtp refused');
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            status: 'FAIL',
            remark: 'smtp refused',
          });
          expect(await ledger.claim(request)).toMatchObject({ status: 'reclaimed', claim: { attempt: 2 } });
        }),
      );

      leased(
        'release deletes the row so the next claim acquires afresh',
        oneLedger(async ({ ledger, request }) => {
          await ledger.release(wonClaim(await ledger.claim(request)));
          expect(await ledger.get(request.group, request.key)).toBeUndefined();
          expect(await ledger.claim(request)).toMatchObject({ status: 'acquired', claim: { attempt: 1 } });
        }),
      );
    });

    describeLedgerLifecycle(factory);
    describeLedgerMaintenance(factory, caps);
    describeLedgerBatchClaims(factory, caps);
    describeLedgerHostileInput(factory, caps);
    describeLedgerLimits(factory, caps);
  });
}
