/**
 * The local broker: the oncemq pipeline beside the broker's own API with a hand-written processor
 * (the claim and the points write by hand, then an `executed` outcome the broker acks on), on brokers
 * of their own in one scratch directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Envelope } from '../../src/core/envelope.js';
import type { Outcome } from '../../src/core/outcome.js';
import { outcomeFor } from '../../src/testing/transport-conformance-fixture.js';
import { LocalBroker } from '../../src/transport/local/local-transport.js';
import type { Processor } from '../../src/transport/transport.js';
import { GROUP, TOPIC, type RawMessage } from '../points-db.js';
import { inWindows, PUBLISH_WINDOW, type TransportTarget } from '../transport-target.js';

function scratchBroker(scope: string): { broker: LocalBroker; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `${scope}-`));
  return {
    broker: new LocalBroker({ path: join(dir, 'broker.db') }),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** What the broker acks on: the outcome a hand-written processor reports, built as the conformance suite builds it. */
const executed = (envelope: Envelope): Outcome => outcomeFor(envelope, 'ack', 0);

const rawOf = (envelope: Envelope): RawMessage => ({ body: envelope.body, brokerId: envelope.brokerId });

export const target: TransportTarget = {
  name: 'local',
  async open(scope) {
    const { broker, remove } = scratchBroker(scope);
    await broker.init();
    return {
      transport: broker,
      cleanup: () => {
        remove();
        return Promise.resolve();
      },
    };
  },
  async raw(scope, options) {
    const { broker, remove } = scratchBroker(scope);
    await broker.init();
    return {
      publish: (bodies) =>
        inWindows(bodies.length, PUBLISH_WINDOW, (i) =>
          broker.publish({ topic: TOPIC, body: bodies[i] ?? '' }),
        ),
      async consume(work, acked, failed) {
        // A failed write is not acked: the drain stops with the error.
        const run = async (envelopes: readonly Envelope[]): Promise<void> => {
          try {
            await work(envelopes.map(rawOf));
          } catch (error) {
            failed(error);
            throw error;
          }
          acked(envelopes.length);
        };
        const processor: Processor = {
          async process(envelope) {
            await run([envelope]);
            return executed(envelope);
          },
        };
        const batches = options.batchSize > 1;
        const subscription = await broker.subscribe(
          GROUP,
          [TOPIC],
          batches
            ? {
                ...processor,
                async processBatch(envelopes) {
                  await run(envelopes);
                  return envelopes.map(executed);
                },
              }
            : processor,
          { concurrency: options.concurrency, ...(batches ? { batchSize: options.batchSize } : {}) },
        );
        return { stop: () => subscription.close() };
      },
      async close() {
        await broker.close();
        remove();
      },
    };
  },
};
