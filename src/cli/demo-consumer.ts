import type { PipelineMetrics } from '../consumer/metrics.js';
import { createPipeline } from '../consumer/pipeline.js';
import { RetryPolicy } from '../core/retry-policy.js';
import { KEY_HEADER, type Envelope } from '../core/envelope.js';
import type { Outcome } from '../core/outcome.js';
import { injectCommitFailures } from '../testing/commit-failure.js';
import type { EffectChecker } from '../testing/effect-checker.js';
import type { FaultInjector } from '../testing/fault-injector.js';
import type { Processor } from '../transport/transport.js';
import type { DemoStore } from './demo-store.js';
import { SILENT_LOGGER } from '../core/logger.js';

export const DEMO_GROUP = 'points';
export const DEMO_TOPIC = 'payment-succeeded';
export const POINTS_PER_EVENT = 100;

/**
 * The demo's retry schedule: RocketMQ's shape (a few growing delays, then the dead-letter queue)
 * scaled down so that a run takes seconds: 100ms, 200ms, 500ms, 1s, 2s.
 */
export const DEMO_RETRY = new RetryPolicy({ name: 'demo', delays: ['100ms', '200ms', '500ms', '1s', '2s'] });

/** The event the demo's producer publishes. */
export interface PaymentSucceeded {
  readonly eventId: string;
  readonly orderId: string;
  readonly userId: string;
  readonly amount: number;
}

/** The demo's consumer, and how many deliveries it saw. */
export interface DemoConsumer {
  readonly processor: Processor;
  deliveries(): number;
  /** The pipeline's counters (none for the naive consumer). */
  metrics(): PipelineMetrics | undefined;
}

const textDecoder = new TextDecoder();

/** A consumer without oncemq: applies the effect, acks, and retries on error like any consumer. */
function naiveConsumer(store: DemoStore, injector: FaultInjector): DemoConsumer {
  let deliveries = 0;
  const processor: Processor = {
    async process(envelope: Envelope): Promise<Outcome> {
      deliveries++;
      const started = performance.now();
      const base = {
        group: DEMO_GROUP,
        key: envelope.headers[KEY_HEADER] ?? null,
        topic: envelope.topic,
        brokerId: envelope.brokerId,
        deliveryCount: envelope.deliveryCount,
      };
      try {
        const event = JSON.parse(textDecoder.decode(envelope.body)) as PaymentSucceeded;
        await store.addPointsDirect(event.userId, event.eventId, POINTS_PER_EVENT);
        injector.handlerCrash(event.eventId);
        return {
          ...base,
          elapsedMs: performance.now() - started,
          kind: 'executed',
          action: 'ack',
          mode: 'leased',
          attempt: 1,
          reclaimed: false,
          leaseLost: false,
        };
      } catch (error) {
        const decision = DEMO_RETRY.decide(envelope.deliveryCount - 1);
        const elapsedMs = performance.now() - started;
        if (decision.action === 'retry') {
          return {
            ...base,
            elapsedMs,
            kind: 'retry',
            action: 'retry',
            delayMs: decision.delayMs,
            nextDeliveryCount: envelope.deliveryCount + 1,
            reconsumeTimes: decision.reconsumeTimes,
            error,
          };
        }
        return {
          ...base,
          elapsedMs,
          kind: 'dead',
          action: 'dead-letter',
          reason: 'retries-exhausted',
          error,
        };
      }
    },
  };
  return { processor, deliveries: () => deliveries, metrics: () => undefined };
}

/**
 * The payment-to-points consumer: the oncemq pipeline (claim and points in one transaction, handler
 * crashes and commit failures injected), or with `naive` a plain consumer without a ledger.
 */
export function demoConsumer(
  store: DemoStore,
  injector: FaultInjector,
  checker: EffectChecker,
  naive: boolean,
): DemoConsumer {
  if (naive) return naiveConsumer(store, injector);
  const pipeline = createPipeline<unknown, PaymentSucceeded>({
    // commit-failure: the commit fails after the handler succeeded (the naive consumer has no commit)
    ledger: injector.enabled('commit-failure') ? injectCommitFailures(store.ledger, injector) : store.ledger,
    group: DEMO_GROUP,
    retry: DEMO_RETRY,
    // The demo's faults fail handlers and commits on purpose: their lines would drown the summary.
    logger: SILENT_LOGGER,
    handler: async (event, ctx) => {
      await store.addPoints(ctx.tx, event.userId, event.eventId, POINTS_PER_EVENT);
      injector.handlerCrash(ctx.key, ctx.attempt);
    },
    onOutcome: (outcome) => {
      checker.observe(outcome);
    },
  });
  return {
    processor: pipeline,
    deliveries: () => pipeline.metrics().deliveries,
    metrics: () => pipeline.metrics(),
  };
}
