/**
 * Transports end to end, per broker and in one run: the raw client doing publish → consume → the
 * claim + points write by hand in one PostgreSQL transaction → ack (`raw:<t>`), beside the same flow
 * through the oncemq transport and pipeline on the PostgreSQL ledger (`oncemq:<t>`); and in batches
 * (`raw:<t>:batch`, `oncemq:<t>:batch` with a batch handler: one business statement per batch).
 * Every row stores its messages first, then the consuming side is timed until the last effect.
 *
 *   npm run bench -- transport [--json] [--flag transport=rabbitmq,nats,redis-streams,local]
 *     [--flag messages=10000] [--flag repetitions=3] [--flag concurrency=16] [--flag batch=100]
 *     [--flag shape=single,batch] [--flag warmup=2000] [--flag profile=DIR] [--flag split=1]
 */
import { randomBytes } from 'node:crypto';
import { measureDrains } from './drain.js';
import { listFlag, wholeFlag } from './flags.js';
import type { BenchResult, Suite } from './harness.js';
import { PointsDatabase } from './points-db.js';
import { oncemqRow, rawRow, transportOnlyRow, type RowShape } from './transport-rows.js';
import { reachableTargets, TARGETS } from './transport-list.js';

export const suite: Suite = {
  name: 'transport',
  description:
    'publish → consume → claim + points write → ack, raw client vs oncemq, per transport (sized by messages, not seconds)',
  async run({ flags }) {
    const known = Object.keys(TARGETS);
    const chosen = listFlag(flags, 'transport', known, known);
    const messages = wholeFlag(flags, 'messages', 10_000);
    const repetitions = wholeFlag(flags, 'repetitions', 3);
    const concurrency = wholeFlag(flags, 'concurrency', 16);
    const batch = wholeFlag(flags, 'batch', 100, 2);
    const warmup = wholeFlag(flags, 'warmup', Math.min(messages, 2000), 0);
    // 1: the one-by-one rows get a third, the transport without the pipeline (oncemq-transport:<t>).
    const split = wholeFlag(flags, 'split', 0, 0) > 0;
    const single: RowShape = { concurrency, batchSize: 1 };
    // Two batches in flight, so one is read while the other commits.
    const batched: RowShape = { concurrency: 2 * batch, batchSize: batch };
    const shapes = listFlag(flags, 'shape', ['single', 'batch'], ['single', 'batch']).map((shape) =>
      shape === 'single' ? single : batched,
    );
    const runId = randomBytes(3).toString('hex');
    const db = new PointsDatabase(concurrency);
    const results: BenchResult[] = [];
    try {
      await db.init();
      for (const target of await reachableTargets(chosen, flags.transport !== undefined, 'transport')) {
        const name = target.name;
        const scope = `oncemq-bench-${runId}-${name}`;
        for (const shape of shapes) {
          const rows = [rawRow(target, db, scope, shape), oncemqRow(target, db, scope, shape)];
          if (split && shape === single) rows.push(transportOnlyRow(target, db, scope, shape.concurrency));
          results.push(
            ...(await measureDrains(rows, {
              messages,
              repetitions,
              effects: () => db.effects(),
              runId: `${runId}-${name}`,
              warmup,
              ...(flags.profile === undefined ? {} : { profileDir: flags.profile }),
            })),
          );
        }
      }
      return results;
    } finally {
      await db.close();
    }
  },
};
