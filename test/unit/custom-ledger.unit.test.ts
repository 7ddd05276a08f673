import { describe, expect, it } from 'vitest';
import { ClosedError, createPipeline, createEnvelope, KEY_HEADER } from 'oncemq';
import { describeLedgerConformance } from 'oncemq/conformance';
import { MemoryLedger, type MemoryRows } from '../support/memory-ledger.js';

describeLedgerConformance<never>('memory (a custom backend)', {
  capabilities: new MemoryLedger().capabilities,
  create() {
    const rows: MemoryRows = new Map();
    return Promise.resolve({
      async open(options = {}) {
        const ledger = new MemoryLedger({ rows, clock: options.clock });
        await ledger.init();
        return ledger;
      },
      teardown: () => Promise.resolve(),
    });
  },
});

describe('a custom backend gets the same wrapping as the built-in ones', () => {
  it('declares what it implements: leased claims and purge, nothing else', () => {
    expect(new MemoryLedger().capabilities).toMatchObject({
      transactional: false,
      leased: true,
      purge: true,
      batchClaim: false,
      inspect: false,
      maintenanceLock: false,
    });
  });

  it('runs a leased pipeline once per key, and is refused after close()', async () => {
    const ledger = new MemoryLedger();
    let runs = 0;
    const pipeline = createPipeline({
      ledger,
      group: 'mail',
      decode: 'bytes',
      handler: () => {
        runs++;
      },
    });
    const copy = (brokerId: string) =>
      createEnvelope({ brokerId, topic: 'signups', body: 'welcome', headers: { [KEY_HEADER]: 'user-1' } });
    expect(await pipeline.process(copy('a'))).toMatchObject({ kind: 'executed', mode: 'leased' });
    expect(await pipeline.process(copy('b'))).toMatchObject({ kind: 'duplicate', source: 'republish' });
    expect(runs).toBe(1);
    await ledger.close();
    await expect(ledger.get('mail', 'user-1')).rejects.toBeInstanceOf(ClosedError);
  });
});
