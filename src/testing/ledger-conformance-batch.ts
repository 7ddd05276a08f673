import { describe, expect, it } from 'vitest';
import type { LedgerCapabilities } from '../ledger/ledger.js';
import {
  applyThen,
  conformanceRequest,
  withNamespace,
  type LedgerConformanceFactory,
  type LedgerNamespace,
} from './ledger-conformance-fixture.js';

/** Batch claims: one transaction, one commit, every key decided as it would be one by one. */
export function describeLedgerBatchClaims<Tx>(
  factory: LedgerConformanceFactory<Tx>,
  caps: LedgerCapabilities,
): void {
  const run = (body: (namespace: LedgerNamespace<Tx>) => Promise<void>) => () => withNamespace(factory, body);
  const batch = it.skipIf(!caps.batchClaim || !caps.transactional);

  describe('batch claims', () => {
    batch(
      'a later copy of a key in the same batch is decided as a later delivery would be: another payload is a conflict, the same one a duplicate',
      run(async (ns) => {
        const ledger = await ns.open();
        const fresh = conformanceRequest();
        const batch = [
          fresh,
          { ...fresh, fingerprint: 'fp-2', brokerId: 'reused' },
          { ...fresh, brokerId: 'twin' },
          { ...fresh, fingerprint: null, brokerId: 'unprinted' },
        ];
        const results = await ledger.transactionMany(batch, (tx, won) =>
          applyThen(
            ns,
            tx,
            won.map(({ claim }) => claim.key),
            won.map(() => null),
          ),
        );
        expect(results.map((r) => r.status)).toEqual(['acquired', 'conflict', 'duplicate', 'duplicate']);
        expect(results[1]).toMatchObject({ record: { fingerprint: 'fp-1', brokerId: fresh.brokerId } });
        if (ns.effect) expect(await ns.effect.count(fresh.key)).toBe(1);
      }),
    );

    batch(
      'in a batch that wins nothing, a later copy with another payload is still a conflict',
      run(async (ns) => {
        const ledger = await ns.open();
        const done = conformanceRequest();
        await ledger.transaction(done, () => null);
        const results = await ledger.transactionMany(
          [done, { ...done, fingerprint: 'fp-2' }, { ...done, brokerId: 'again' }],
          () => [],
        );
        expect(results.map((r) => r.status)).toEqual(['duplicate', 'conflict', 'duplicate']);
      }),
    );

    batch(
      'claims a batch in one transaction: new keys are won, committed keys are duplicates, failed keys are reclaimed, reused keys conflict',
      run(async (ns) => {
        const ledger = await ns.open();
        const many = ledger.transactionMany.bind(ledger);
        const fresh = conformanceRequest();
        const done = conformanceRequest();
        const failed = conformanceRequest();
        const reused = conformanceRequest();
        const other = conformanceRequest();
        await ledger.transaction(done, () => '"first"');
        await ledger.recordFailure(failed, 'first attempt failed');
        await ledger.transaction(reused, () => null);
        const batch = [
          fresh,
          done,
          other,
          failed,
          { ...reused, fingerprint: 'fp-2' },
          { ...fresh, brokerId: 'twin' },
        ];
        const seen: number[] = [];
        const results = await many(batch, async (tx, won) => {
          for (const { index, claim } of won) {
            seen.push(index);
            await ns.effect?.apply(tx, claim.key);
          }
          return won.map(({ index }) => `"r${index}"`);
        });
        expect(results.map((r) => r.status)).toEqual([
          'acquired',
          'duplicate',
          'acquired',
          'reclaimed',
          'conflict',
          'duplicate',
        ]);
        expect(seen).toEqual([0, 2, 3]);
        expect(results[1]).toMatchObject({ record: { result: '"first"', brokerId: done.brokerId } });
        expect(results[3]).toMatchObject({ claim: { attempt: 2 } });
        expect(await ledger.get(fresh.group, fresh.key)).toMatchObject({ status: 'SUCCESS', result: '"r0"' });
        expect(await ledger.get(failed.group, failed.key)).toMatchObject({
          status: 'SUCCESS',
          result: '"r3"',
        });
        if (ns.effect) {
          expect(await ns.effect.count(fresh.key)).toBe(1);
          expect(await ns.effect.count(done.key)).toBe(0);
        }
      }),
    );

    batch(
      'work that throws rolls back the whole batch and every key is free again',
      run(async (ns) => {
        const ledger = await ns.open();
        const many = ledger.transactionMany.bind(ledger);
        const failed = conformanceRequest();
        await ledger.recordFailure(failed, 'first attempt failed');
        const batch = [conformanceRequest(), conformanceRequest(), failed];
        await expect(
          many(batch, async (tx, won) => {
            for (const { claim } of won) await ns.effect?.apply(tx, claim.key);
            throw new Error('one poison message');
          }),
        ).rejects.toThrow('one poison message');
        expect(await ledger.get(batch[0]?.group ?? '', batch[0]?.key ?? '')).toBeUndefined();
        expect(await ledger.get(failed.group, failed.key)).toMatchObject({ status: 'FAIL', attempt: 1 });
        if (ns.effect) expect(await ns.effect.count(batch[0]?.key ?? '')).toBe(0);
        const again = await many(batch, (_tx, won) => won.map(() => null));
        expect(again.map((r) => r.status)).toEqual(['acquired', 'acquired', 'reclaimed']);
      }),
    );

    it.skipIf(!caps.batchClaim || !caps.transactional || !caps.concurrentConnections)(
      'overlapping batches on separate connections win every key exactly once',
      run(async (ns) => {
        const ledgers = await Promise.all([ns.open(), ns.open(), ns.open(), ns.open()]);
        const keys = Array.from({ length: 400 }, () => conformanceRequest());
        const wins = new Map<string, number>();
        await Promise.all(
          ledgers.map((ledger, i) => {
            const rotated = [...keys.slice(i * 100), ...keys.slice(0, i * 100)];
            const many = ledger.transactionMany.bind(ledger);
            return many(rotated, (tx, won) => {
              for (const { claim } of won) wins.set(claim.key, (wins.get(claim.key) ?? 0) + 1);
              return applyThen(
                ns,
                tx,
                won.map(({ claim }) => claim.key),
                won.map(() => null),
              );
            });
          }),
        );
        expect(wins.size).toBe(keys.length);
        expect([...wins.values()].every((n) => n === 1)).toBe(true);
        const effect = ns.effect;
        if (effect) {
          const counts = await Promise.all(keys.map((k) => effect.count(k.key)));
          expect(counts.every((n) => n === 1)).toBe(true);
        }
      }),
    );
  });
}
