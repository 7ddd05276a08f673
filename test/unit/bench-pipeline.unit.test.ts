import { describe, expect, it } from 'vitest';
import { describeLedgerConformance } from 'oncemq/conformance';
import { MemoryPipelineLedger, memoryStore, type Points } from '../../bench/memory-pipeline-ledger.js';
import { runPipelineBench } from '../../bench/pipeline-run.js';

/*
 * The `pipeline` bench measures the pipeline over an in-memory ledger: that ledger must answer as
 * the real ones do, or the figures measure another path. It passes the ledger conformance suite.
 */
describeLedgerConformance<Points>('bench memory ledger', {
  capabilities: new MemoryPipelineLedger(new Map()).capabilities,
  create() {
    const store = memoryStore();
    const points: Points = new Map();
    return Promise.resolve({
      async open(options = {}) {
        const ledger = new MemoryPipelineLedger(points, { store, clock: options.clock });
        await ledger.init();
        return ledger;
      },
      teardown: () => Promise.resolve(),
    });
  },
});

describe('npm run bench -- pipeline', () => {
  it('gives every row its rate, CPU and allocation per message, each oncemq row beside its raw one', async () => {
    const rows = await runPipelineBench({ messages: 200, repetitions: 2, warmup: 100, batchSize: 16 });
    expect(rows.map((row) => row.name)).toEqual([
      'raw:pipeline:single',
      'oncemq:pipeline:single',
      'oncemq:pipeline:leased',
      'raw:pipeline:batch',
      'oncemq:pipeline:batch',
    ]);
    for (const row of rows) {
      expect(row.samples, row.name).toHaveLength(2);
      for (const sample of row.samples) {
        expect(sample.wallNs, row.name).toBeGreaterThan(0);
        expect(sample.cpuNs, row.name).toBeGreaterThan(0);
      }
      if (row.name.startsWith('oncemq:')) expect(row.baseline, row.name).toMatch(/^raw:pipeline:/);
    }
  });
});
