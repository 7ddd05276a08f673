/**
 * Per-key ordered consumption against unordered, in one run: the same messages (spread over 1,000
 * ordering keys, the order ids) drained through the same transport and pipeline on the PostgreSQL
 * ledger, with `ordering: {}` (`oncemq:ordered`) and without (`oncemq:unordered`), at the same
 * concurrency. Only transports with the `ordering` capability take part (the local broker today;
 * rows of another transport carry its name: `oncemq:ordered:<t>`). Every drain also counts the
 * messages whose handler ran before an earlier message of the same key: the ordered row must have none.
 *
 *   npm run bench -- ordered [--json] [--flag keys=1000] [--flag messages=10000] [--flag repetitions=3]
 *     [--flag concurrency=16] [--flag transport=local]
 */
import { randomBytes } from 'node:crypto';
import type { SubscribeOptions } from '../src/transport/transport.js';
import { measureDrains, type DrainContender } from './drain.js';
import { listFlag, wholeFlag } from './flags.js';
import type { BenchResult, Suite } from './harness.js';
import { GROUP, payment, PointsDatabase, TOPIC, type Payment } from './points-db.js';
import { OutcomeSink } from './transport-rows.js';
import { inWindows, PUBLISH_WINDOW, type TransportTarget } from './transport-target.js';
import { reachableTargets, TARGETS } from './transport-list.js';

/** Counts handler runs that came before an earlier message of their key (publish order is `n`). */
class OrderWatch {
  #last = new Map<string, number>();
  outOfOrder = 0;

  reset(): void {
    this.#last = new Map();
  }

  readonly seen = (event: Payment): void => {
    const last = this.#last.get(event.orderId);
    if (last !== undefined && event.n < last) this.outOfOrder++;
    else this.#last.set(event.orderId, event.n);
  };
}

interface OrderedShape {
  readonly ordered: boolean;
  readonly concurrency: number;
  readonly keys: number;
}

function orderedRow(
  target: TransportTarget,
  db: PointsDatabase,
  scope: string,
  shape: OrderedShape,
  report: (name: string, outOfOrder: number) => void,
): DrainContender {
  const suffix = target.name === 'local' ? '' : `:${target.name}`;
  const name = `oncemq:${shape.ordered ? 'ordered' : 'unordered'}${suffix}`;
  return {
    name,
    concurrency: shape.concurrency,
    ...(shape.ordered ? { baseline: `oncemq:unordered${suffix}` } : {}),
    note: `${shape.keys} keys`,
    async open() {
      const { transport, cleanup } = await target.open(`${scope}-${shape.ordered ? 'o' : 'u'}`);
      const sink = new OutcomeSink();
      const watch = new OrderWatch();
      const pipeline = db.pipeline(sink.onOutcome, watch.seen);
      const processor = { process: pipeline.process.bind(pipeline) };
      const options: SubscribeOptions = {
        concurrency: shape.concurrency,
        ...(shape.ordered ? { ordering: {} } : {}),
      };
      await (await transport.subscribe(GROUP, [TOPIC], processor, options)).close();
      return {
        publish: (run) =>
          inWindows(run.count, PUBLISH_WINDOW, (n) => {
            const body = payment(run.tag, n, shape.keys);
            return transport.publish({ topic: TOPIC, key: body.eventId, orderingKey: body.orderId, body });
          }),
        consume: async (run) => {
          sink.run = run;
          watch.reset();
          const subscription = await transport.subscribe(GROUP, [TOPIC], processor, options);
          return {
            stop: async () => {
              await subscription.close();
              report(name, watch.outOfOrder);
              if (shape.ordered && watch.outOfOrder > 0) {
                throw new Error(
                  `${name}: ${watch.outOfOrder} messages ran before an earlier one of their key`,
                );
              }
            },
          };
        },
        close: async () => {
          pipeline.close();
          await transport.close();
          await cleanup();
        },
      };
    },
  };
}

export const suite: Suite = {
  name: 'ordered',
  description: 'per-key ordered vs unordered consumption, same messages and concurrency (sized by messages)',
  async run({ flags }) {
    const known = Object.keys(TARGETS);
    const keys = wholeFlag(flags, 'keys', 1000);
    const messages = wholeFlag(flags, 'messages', 10_000);
    const repetitions = wholeFlag(flags, 'repetitions', 3);
    const concurrency = wholeFlag(flags, 'concurrency', 16);
    const explicit = flags.transport !== undefined;
    const chosen = listFlag(flags, 'transport', known, known);
    const runId = randomBytes(3).toString('hex');
    const db = new PointsDatabase(concurrency);
    const results: BenchResult[] = [];
    try {
      await db.init();
      for (const target of await reachableTargets(chosen, explicit, 'ordered')) {
        const scope = `oncemq-bench-${runId}-${target.name}`;
        const probe = await target.open(`${scope}-probe`);
        const ordering = probe.transport.capabilities.ordering;
        await probe.transport.close();
        await probe.cleanup();
        if (!ordering) {
          if (explicit) throw new Error(`ordered: ${target.name} has no ordering capability`);
          console.error(`ordered: skipping ${target.name}: no ordering capability`);
          continue;
        }
        const outOfOrder = new Map<string, number>();
        const report = (name: string, count: number): void => {
          outOfOrder.set(name, (outOfOrder.get(name) ?? 0) + count);
        };
        const rows = [true, false].map((ordered) =>
          orderedRow(target, db, scope, { ordered, concurrency, keys }, report),
        );
        const measured = await measureDrains(rows, {
          messages,
          repetitions,
          effects: () => db.effects(),
          runId: `${runId}-${target.name}`,
        });
        results.push(
          ...measured.map((row) => ({
            ...row,
            note: `${row.note ?? ''}, ${outOfOrder.get(row.name) ?? 0} out of order`,
          })),
        );
      }
      return results;
    } finally {
      await db.close();
    }
  },
};
