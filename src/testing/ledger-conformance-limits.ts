import { describe, expect, it } from 'vitest';
import { PermanentError } from '../core/errors.js';
import {
  fitMetadata,
  MAX_FINGERPRINT_LENGTH,
  MAX_LEDGER_KEY_BYTES,
  MAX_METADATA_BYTES,
  MAX_REMARK_LENGTH,
  MAX_RESULT_BYTES,
} from '../ledger/claim-request.js';
import type { ClaimRequest, ClaimResult, Ledger, LedgerCapabilities } from '../ledger/ledger.js';
import {
  conformanceRequest,
  withNamespace,
  wonClaim,
  type LedgerConformanceFactory,
  type LedgerNamespace,
} from './ledger-conformance-fixture.js';

const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** `bytes` UTF-8 bytes of text, four-byte characters first. */
function textOfBytes(bytes: number): string {
  return '🦄'.repeat(Math.floor(bytes / 4)) + 'k'.repeat(bytes % 4);
}

/** Expects `attempt` to fail with a PermanentError of `reason`. */
async function refused(attempt: Promise<unknown>, reason: string): Promise<void> {
  const error: unknown = await attempt.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PermanentError);
  expect((error as PermanentError).reason).toBe(reason);
}

/**
 * Every stored field at and beyond its limit (the one shared definition in claim-request.ts): what
 * fits is stored exactly, a broker id, topic or fingerprint beyond it as its digest, and anything
 * else is a PermanentError — never a driver error that would be retried for ever.
 */
export function describeLedgerLimits<Tx>(
  factory: LedgerConformanceFactory<Tx>,
  caps: LedgerCapabilities,
): void {
  const run = (body: (ledger: Ledger<Tx>, ns: LedgerNamespace<Tx>) => Promise<void>) => () =>
    withNamespace(factory, async (ns) => {
      await body(await ns.open(), ns);
    });
  const claimVia = (ledger: Ledger<Tx>, request: ClaimRequest): Promise<ClaimResult> =>
    caps.transactional ? ledger.transaction(request, () => null) : ledger.claim(request);

  describe('stored limits', () => {
    it(
      `stores a key of ${MAX_LEDGER_KEY_BYTES} UTF-8 bytes exactly and refuses one byte more as invalid-key`,
      run(async (ledger) => {
        const atLimit = conformanceRequest({ key: textOfBytes(MAX_LEDGER_KEY_BYTES) });
        expect((await claimVia(ledger, atLimit)).status).toBe('acquired');
        expect((await ledger.get(atLimit.group, atLimit.key))?.key).toBe(atLimit.key);
        const beyond = conformanceRequest({ key: textOfBytes(MAX_LEDGER_KEY_BYTES + 1) });
        await refused(claimVia(ledger, beyond), 'invalid-key');
        expect(await ledger.get(beyond.group, beyond.key)).toBeUndefined();
      }),
    );

    it(
      'stores a group of 128 characters exactly and refuses a longer one, or one outside the group alphabet, as invalid-key',
      run(async (ledger) => {
        const atLimit = conformanceRequest({ group: 'g:'.repeat(64) });
        expect((await claimVia(ledger, atLimit)).status).toBe('acquired');
        expect((await ledger.get(atLimit.group, atLimit.key))?.group).toBe(atLimit.group);
        await refused(claimVia(ledger, conformanceRequest({ group: 'g'.repeat(129) })), 'invalid-key');
        await refused(claimVia(ledger, conformanceRequest({ group: 'a{b}' })), 'invalid-key');
      }),
    );

    it(
      `stores a broker id and a topic of ${MAX_METADATA_BYTES} UTF-8 bytes exactly, and longer ones (2,000 and 1,100 characters) as their digest`,
      run(async (ledger) => {
        const exact = conformanceRequest({
          brokerId: textOfBytes(MAX_METADATA_BYTES),
          topic: 't'.repeat(MAX_METADATA_BYTES),
        });
        await claimVia(ledger, exact);
        expect(await ledger.get(exact.group, exact.key)).toMatchObject({
          brokerId: exact.brokerId,
          topic: exact.topic,
        });
        const long = conformanceRequest({ brokerId: 'b'.repeat(2000), topic: 't'.repeat(1100) });
        expect((await claimVia(ledger, long)).status).toBe('acquired');
        const stored = await ledger.get(long.group, long.key);
        expect(stored?.brokerId).toMatch(DIGEST);
        expect(stored).toMatchObject({
          brokerId: fitMetadata(long.brokerId),
          topic: fitMetadata(long.topic),
        });
        const again = await claimVia(ledger, long);
        expect(again.status).not.toBe('acquired');
        expect(again).toMatchObject({ record: { brokerId: fitMetadata(long.brokerId) } });
      }),
    );

    it(
      `stores a fingerprint of ${MAX_FINGERPRINT_LENGTH} characters exactly, a longer one as its digest, and still tells the same long payload from another`,
      run(async (ledger) => {
        const exact = conformanceRequest({ fingerprint: 'f'.repeat(MAX_FINGERPRINT_LENGTH) });
        await claimVia(ledger, exact);
        expect((await ledger.get(exact.group, exact.key))?.fingerprint).toBe(exact.fingerprint);
        const long = conformanceRequest({ fingerprint: 'f'.repeat(500) });
        await claimVia(ledger, long);
        expect((await ledger.get(long.group, long.key))?.fingerprint).toMatch(DIGEST);
        expect((await claimVia(ledger, long)).status).not.toBe('conflict');
        expect((await claimVia(ledger, { ...long, fingerprint: 'g'.repeat(500) })).status).toBe('conflict');
      }),
    );

    it(
      `cuts a failure remark at ${MAX_REMARK_LENGTH} characters and stores NUL and lone surrogates as U+FFFD`,
      run(async (ledger) => {
        const fail = async (request: ClaimRequest, remark: string): Promise<string | null | undefined> => {
          if (caps.transactional) await ledger.recordFailure(request, remark);
          else await ledger.fail(wonClaim(await ledger.claim(request)), remark);
          return (await ledger.get(request.group, request.key))?.remark;
        };
        expect(await fail(conformanceRequest(), 'r'.repeat(MAX_REMARK_LENGTH + 3000))).toBe(
          'r'.repeat(MAX_REMARK_LENGTH),
        );
        expect(await fail(conformanceRequest(), 'a\u0000b\ud800')).toBe('a\uFFFDb\uFFFD');
      }),
    );

    it.skipIf(!caps.storesResult)(
      'stores a result of 1 MiB exactly and refuses one byte more as unstorable-result, leaving the key claimable',
      run(async (ledger) => {
        const big = 'x'.repeat(MAX_RESULT_BYTES);
        const finish = async (request: ClaimRequest, result: string): Promise<unknown> => {
          if (caps.transactional) return ledger.transaction(request, () => result);
          const claim = wonClaim(await ledger.claim(request));
          return ledger.complete(claim, result).catch(async (error: unknown) => {
            await ledger.release(claim);
            throw error;
          });
        };
        const fits = conformanceRequest();
        await finish(fits, big);
        expect((await ledger.get(fits.group, fits.key))?.result).toHaveLength(MAX_RESULT_BYTES);
        const beyond = conformanceRequest();
        await refused(finish(beyond, `${big}y`), 'unstorable-result');
        expect(await ledger.get(beyond.group, beyond.key)).toBeUndefined();
        expect((await claimVia(ledger, beyond)).status).toBe('acquired');
      }),
    );
  });
}
