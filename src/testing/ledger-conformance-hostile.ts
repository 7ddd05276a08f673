import { describe, expect, it } from 'vitest';
import { createPipeline } from '../consumer/pipeline.js';
import { createEnvelope, KEY_HEADER } from '../core/envelope.js';
import { ConfigError, PermanentError } from '../core/errors.js';
import { HASHED_KEY_PREFIX } from '../core/key.js';
import { fitMetadata } from '../ledger/claim-request.js';
import type { ClaimRequest, ClaimResult, Ledger, LedgerCapabilities } from '../ledger/ledger.js';
import {
  conformanceRequest,
  withNamespace,
  type LedgerConformanceFactory,
  type LedgerNamespace,
} from './ledger-conformance-fixture.js';

/** Strings that break naive SQL, encodings or byte-length assumptions. */
export const HOSTILE_STRINGS: readonly string[] = Object.freeze([
  "'; DROP TABLE oncemq_ledger; --",
  '" OR "1"="1',
  'back\\slash\\',
  '%_ LIKE wildcards _%',
  '$1 $$dollar$$ quoting',
  '🦄 emoji 💳 and 中文',
  'trailing space ',
  'Trailing Space ',
  'line\nbreak\ttab',
]);

/** Table names that must be refused with a ConfigError before reaching SQL. */
export const HOSTILE_TABLE_NAMES: readonly string[] = Object.freeze([
  'x; DROP TABLE y',
  'a"b',
  "a'b",
  '',
  '1starts_with_digit',
  'schema.table',
  'tab\u0000le',
  'x'.repeat(64),
  'naïve',
]);

function claimVia(ledger: Ledger, caps: LedgerCapabilities, request: ClaimRequest): Promise<ClaimResult> {
  return caps.transactional ? ledger.transaction(request, () => null) : ledger.claim(request);
}

/** Keys, groups, broker ids and table names chosen to break naive code. */
export function describeLedgerHostileInput<Tx>(
  factory: LedgerConformanceFactory<Tx>,
  caps: LedgerCapabilities,
): void {
  const run = (body: (namespace: LedgerNamespace<Tx>) => Promise<void>) => () => withNamespace(factory, body);

  describe('hostile input', () => {
    it(
      'stores keys and broker ids with SQL metacharacters, quotes, emoji and whitespace, and groups of every allowed character, exactly, each distinct',
      run(async (ns) => {
        const ledger = await ns.open();
        for (const [i, text] of HOSTILE_STRINGS.entries()) {
          const request = conformanceRequest({ key: text, group: `g.${i}:_%|-`, brokerId: text });
          expect((await claimVia(ledger, caps, request)).status).toBe('acquired');
          expect(await ledger.get(request.group, text)).toMatchObject({
            key: text,
            group: request.group,
            brokerId: text,
          });
          expect(await claimVia(ledger, caps, { ...request, brokerId: 'again' })).toMatchObject({
            record: { brokerId: text },
          });
        }
        const shared = 'hostile-shared';
        for (const text of HOSTILE_STRINGS) {
          expect(
            (await claimVia(ledger, caps, conformanceRequest({ group: shared, key: text }))).status,
          ).toBe('acquired');
        }
      }),
    );

    if (caps.batchClaim) {
      it(
        'claims hostile keys, groups, broker ids and topics in one batch, each its own row stored exactly with its result; a second batch answers each a duplicate',
        run(async (ns) => {
          const ledger = await ns.open();
          // Array-literal syntax too: a batch may send its columns as array literals.
          const texts = [...HOSTILE_STRINGS, '{braces,and,commas}', 'NULL', '\\"', 'a","b'];
          const batch = texts.map((text, i) =>
            conformanceRequest({ group: `g.${i % 3}:_%|-`, key: text, brokerId: text, topic: text }),
          );
          const first = await ledger.transactionMany(batch, (_tx, won) =>
            won.map(({ index }) => JSON.stringify({ text: texts[index] })),
          );
          expect(first.map((r) => r.status)).toEqual(texts.map(() => 'acquired'));
          for (const [i, request] of batch.entries()) {
            expect(await ledger.get(request.group, request.key)).toMatchObject({
              group: request.group,
              key: texts[i],
              brokerId: texts[i],
              topic: texts[i],
              status: 'SUCCESS',
              result: JSON.stringify({ text: texts[i] }),
            });
          }
          const again = await ledger.transactionMany(
            batch.map((r) => ({ ...r, brokerId: 'again' })),
            (_tx, won) => won.map(() => null),
          );
          expect(again.map((r) => r.status)).toEqual(texts.map(() => 'duplicate'));
          again.forEach((r, i) =>
            expect(r).toMatchObject({
              record: { key: texts[i], result: JSON.stringify({ text: texts[i] }) },
            }),
          );
        }),
      );
    }

    it(
      'a key with NUL bytes or of 10 kB is refused as a permanent invalid-key error, never a driver error',
      run(async (ns) => {
        const ledger = await ns.open();
        for (const key of [
          'nul\u0000inside',
          'k'.repeat(10_240),
          '🦄'.repeat(2600),
          'lone \ud800 surrogate',
        ]) {
          const request = conformanceRequest({ key });
          const error: unknown = await claimVia(ledger, caps, request).catch((e: unknown) => e);
          expect(error, JSON.stringify(key.slice(0, 20))).toBeInstanceOf(PermanentError);
          expect((error as PermanentError).reason).toBe('invalid-key');
        }
      }),
    );

    it(
      'a broker id or topic with NUL bytes is stored as its digest, and a failure remark with one keeps the rest of its text',
      run(async (ns) => {
        const ledger = await ns.open();
        const request = conformanceRequest({ brokerId: 'id\u0000x', topic: 't\u0000' });
        expect((await claimVia(ledger, caps, request)).status).toBe('acquired');
        expect(await ledger.get(request.group, request.key)).toMatchObject({
          brokerId: fitMetadata(request.brokerId),
          topic: fitMetadata(request.topic),
        });
        if (caps.transactional) {
          const failing = conformanceRequest({ brokerId: '\u0000' });
          await ledger.recordFailure(failing, 'remark with \u0000 inside');
          expect((await ledger.get(failing.group, failing.key))?.remark).toBe('remark with \uFFFD inside');
        }
      }),
    );

    it(
      "joins group and key unambiguously although groups may hold ':': ('a:b', 'c') and ('a', 'b:c') are two rows, one by one and in one batch",
      run(async (ns) => {
        const ledger = await ns.open();
        const pairs = [
          ['a:b', 'c'],
          ['a', 'b:c'],
          ['a:', 'b'],
          ['a', ':b'],
        ] as const;
        const requests = pairs.map(([group, key]) => conformanceRequest({ group, key }));
        for (const request of requests)
          expect((await claimVia(ledger, caps, request)).status).toBe('acquired');
        for (const request of requests) {
          expect(await ledger.get(request.group, request.key)).toMatchObject({
            group: request.group,
            key: request.key,
            brokerId: request.brokerId,
          });
        }
        if (caps.batchClaim) {
          const batch = pairs.map(([group, key]) => conformanceRequest({ group, key: `${key}:batch` }));
          const results = await ledger.transactionMany(batch, (_tx, won) => won.map(() => null));
          expect(results.map((r) => r.status)).toEqual(['acquired', 'acquired', 'acquired', 'acquired']);
          for (const request of batch) {
            expect(await ledger.get(request.group, request.key)).toMatchObject({ status: 'SUCCESS' });
          }
        }
      }),
    );

    it(
      'through the pipeline, a 10 kB key with NUL bytes is normalized to a digest, applied once and then a duplicate',
      run(async (ns) => {
        const ledger = await ns.open();
        let runs = 0;
        const pipeline = createPipeline({
          ledger,
          group: 'hostile-pipeline',
          mode: caps.transactional ? 'transactional' : 'leased',
          decode: 'bytes',
          handler: () => {
            runs++;
          },
        });
        const rawKey = `${'x'.repeat(10_240)}\u0000'; DROP TABLE t; --`;
        const envelope = (brokerId: string) =>
          createEnvelope({ brokerId, topic: 'hostile', body: 'payload', headers: { [KEY_HEADER]: rawKey } });
        const first = await pipeline.process(envelope('b1'));
        const second = await pipeline.process(envelope('b2'));
        expect(first).toMatchObject({ kind: 'executed' });
        expect(second).toMatchObject({ kind: 'duplicate', source: 'republish' });
        expect(runs).toBe(1);
        expect(first.key?.startsWith(HASHED_KEY_PREFIX)).toBe(true);
        expect(await ledger.get('hostile-pipeline', first.key ?? '')).toMatchObject({ status: 'SUCCESS' });
      }),
    );

    it.skipIf(factory.construct === undefined)(
      'refuses table names that are not plain SQL identifiers with a ConfigError naming the field',
      () => {
        for (const table of HOSTILE_TABLE_NAMES) {
          let thrown: unknown;
          try {
            factory.construct?.(table);
          } catch (error) {
            thrown = error;
          }
          expect(thrown, JSON.stringify(table)).toBeInstanceOf(ConfigError);
          expect((thrown as ConfigError).field).toMatch(/table/);
        }
      },
    );
  });
}
