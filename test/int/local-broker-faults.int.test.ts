import type Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Envelope, Outcome } from 'oncemq';
import type { LocalBroker, LocalSubscription } from 'oncemq/local';
import { FaultInjector, type FaultName } from 'oncemq/testing';
import type { PaymentSucceeded } from '../support/points.js';
import { scratchDir } from '../support/points.js';
import {
  ackOutcome,
  outcomeBase,
  PointsApp,
  publishPayments,
  QUICK_RETRY,
  testBroker,
  waitUntil,
} from '../support/local-points.js';

const EVENTS = 24;

/** A consumer without oncemq: writes, acks; retries when the handler throws. */
function naive(db: Database.Database, injector: FaultInjector, seen: Envelope[]) {
  return (envelope: Envelope): Promise<Outcome> => {
    seen.push(envelope);
    const base = outcomeBase(envelope, 'points');
    const event = JSON.parse(new TextDecoder().decode(envelope.body)) as PaymentSucceeded;
    try {
      PointsApp.write(db, event);
      injector.handlerCrash(event.eventId);
    } catch (error) {
      const decision = QUICK_RETRY.decide(envelope.deliveryCount - 1);
      return Promise.resolve({
        ...base,
        kind: 'retry',
        action: 'retry',
        delayMs: 10,
        nextDeliveryCount: envelope.deliveryCount + 1,
        reconsumeTimes: decision.reconsumeTimes,
        error,
      });
    }
    return Promise.resolve(ackOutcome(envelope, base, 'leased'));
  };
}

interface Scenario {
  readonly fault: FaultName;
  readonly rate: number;
  /** How the broker ids of two copies of one key relate. */
  readonly relation: 'same' | 'different';
  readonly absorbedAs: 'redelivery' | 'republish' | 'retry';
}

const scenarios: readonly Scenario[] = [
  { fault: 'producer-ack-loss', rate: 0.5, relation: 'different', absorbedAs: 'republish' },
  { fault: 'consumer-ack-loss', rate: 0.3, relation: 'same', absorbedAs: 'redelivery' },
  { fault: 'crash-after-commit', rate: 0.2, relation: 'same', absorbedAs: 'redelivery' },
  { fault: 'rebalance', rate: 1, relation: 'same', absorbedAs: 'redelivery' },
  { fault: 'handler-crash', rate: 0.3, relation: 'different', absorbedAs: 'retry' },
];

describe('each duplicate source alone on the local broker', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let broker: LocalBroker;
  let app: PointsApp;
  const subscriptions: LocalSubscription[] = [];

  beforeEach(() => {
    scratch = scratchDir();
    app = new PointsApp(scratch.dir);
  });

  afterEach(async () => {
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    await broker.close();
    await app.close();
    scratch.remove();
  });

  const run = async (
    scenario: Scenario,
    processorFor: (injector: FaultInjector) => Parameters<LocalBroker['subscribe']>[2],
    batchSize?: number,
  ) => {
    const injector = new FaultInjector({
      seed: 11,
      faults: [scenario.fault],
      rates: { [scenario.fault]: scenario.rate },
    });
    broker = testBroker(scratch.dir, { faults: injector, pullBatchSize: 4 });
    await publishPayments(broker, EVENTS);
    subscriptions.push(
      await broker.subscribe('points', ['payments'], processorFor(injector), {
        consumerName: 'a',
        batchSize,
      }),
    );
    subscriptions.push(
      await broker.subscribe('points', ['payments'], processorFor(injector), {
        consumerName: 'b',
        batchSize,
      }),
    );
    await waitUntil(async () => {
      for (const subscription of subscriptions) subscription.commit();
      return (await broker.lag('points', ['payments'])) === 0;
    }, `draining under ${scenario.fault}`);
    expect(injector.counts()[scenario.fault]).toBeGreaterThan(0);
  };

  /** Broker ids delivered per key. */
  const copiesByKey = (deliveries: readonly Envelope[]): Map<string, string[]> => {
    const byKey = new Map<string, string[]>();
    for (const envelope of deliveries) {
      const key = envelope.headers['oncemq-key'] ?? '';
      byKey.set(key, [...(byKey.get(key) ?? []), envelope.brokerId]);
    }
    return byKey;
  };

  // Each fault through both consumer paths: pulled batches handed to processBatch (the default), and
  // one delivery at a time through process (batchSize 1).
  for (const scenario of scenarios) {
    for (const path of ['processBatch', 'process'] as const) {
      it(`${scenario.fault} through ${path}: copies come with ${scenario.relation} broker ids and oncemq applies each effect once`, async () => {
        let batches = 0;
        await run(
          scenario,
          (injector) => {
            const pipeline = app.pipeline({
              onHandler: (event) => {
                injector.handlerCrash(event.eventId);
              },
            });
            return {
              process: (envelope) => pipeline.process(envelope),
              processBatch: (envelopes) => {
                batches++;
                return pipeline.processBatch(envelopes);
              },
            };
          },
          path === 'process' ? 1 : undefined,
        );
        if (path === 'processBatch') expect(batches).toBeGreaterThan(0);
        else expect(batches).toBe(0);
        const repeated = [...copiesByKey(app.deliveries).values()].filter((ids) => ids.length > 1);
        expect(repeated.length).toBeGreaterThan(0);
        for (const ids of repeated) {
          if (scenario.relation === 'same') expect(new Set(ids).size).toBeLessThan(ids.length);
          else expect(new Set(ids).size).toBe(ids.length);
        }
        if (scenario.fault === 'producer-ack-loss') {
          const stored = await broker.messages('payments');
          expect(stored.length).toBeGreaterThan(EVENTS);
          const uniqueIds = new Map<string, Set<string>>();
          for (const copy of stored) {
            const key = copy.headers['oncemq-key'] ?? '';
            uniqueIds.set(key, (uniqueIds.get(key) ?? new Set()).add(copy.uniqueId));
          }
          expect([...uniqueIds.values()].every((ids) => ids.size === 1)).toBe(true);
        }
        const effects = app.effects();
        expect(effects.size).toBe(EVENTS);
        expect([...effects.values()].every((count) => count === 1)).toBe(true);
        if (scenario.absorbedAs === 'retry') {
          expect(app.outcomes.some((o) => o.kind === 'retry')).toBe(true);
        } else {
          const sources = app.outcomes.flatMap((o) => (o.kind === 'duplicate' ? [o.source] : []));
          expect(sources).toContain(scenario.absorbedAs);
        }
      });
    }

    it(`${scenario.fault}: a naive consumer applies some effect twice`, async () => {
      const seen: Envelope[] = [];
      await run(scenario, (injector) => naive(app.db, injector, seen));
      const effects = app.effects();
      expect(effects.size).toBe(EVENTS);
      expect([...effects.values()].some((count) => count > 1)).toBe(true);
    });
  }
});
