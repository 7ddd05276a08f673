import { describe, expect, it } from 'vitest';
import { ClosedError } from '../core/errors.js';
import { ledgerCases, type LedgerConformanceFactory } from './ledger-conformance-fixture.js';

/** What the runtime wrapper promises on every ledger: init again is cheap, nothing works after close. */
export function describeLedgerLifecycle<Tx>(factory: LedgerConformanceFactory<Tx>): void {
  const { oneLedger } = ledgerCases(factory);

  describe('lifecycle', () => {
    it(
      'init() again resolves at once; after close() every method is refused with ClosedError, and close() again resolves',
      oneLedger(async ({ ledger, request }) => {
        await Promise.all([ledger.init(), ledger.init()]);
        await ledger.close();
        await ledger.close();
        const claim = {
          group: request.group,
          key: request.key,
          owner: 'o',
          attempt: 1,
          leaseUntil: new Date(),
        };
        const calls: (() => Promise<unknown>)[] = [
          () => ledger.init(),
          () => ledger.transaction(request, () => null),
          () => ledger.recordFailure(request, 'closed'),
          () => ledger.transactionMany([request], () => []),
          () => ledger.claim(request),
          () => ledger.renew(claim, 1000),
          () => ledger.complete(claim, null),
          () => ledger.fail(claim, 'closed'),
          () => ledger.release(claim),
          () => ledger.get(request.group, request.key),
          () => ledger.list({}),
          () => ledger.reset(request.group, request.key),
          () => ledger.tryMaintenanceLock(),
          () => ledger.purge({ olderThan: new Date() }),
        ];
        for (const call of calls) await expect(call()).rejects.toBeInstanceOf(ClosedError);
      }),
    );
  });
}
