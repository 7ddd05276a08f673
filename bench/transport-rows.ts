/**
 * The rows of the transport suite, for any {@link TransportTarget}: `raw:<t>` (the raw client doing
 * the claim + points write by hand, then the ack) and `oncemq:<t>` (the transport and the pipeline on
 * the PostgreSQL ledger), one by one or in batches.
 */
import { KEY_HEADER } from '../src/core/envelope.js';
import type { ExecutedOutcome, Outcome } from '../src/core/outcome.js';
import type { Pipeline } from '../src/consumer/pipeline.js';
import type { Processor, SubscribeOptions } from '../src/transport/transport.js';
import type { DrainContender, DrainRun } from './drain.js';
import { GROUP, payment, TOPIC, type PointsDatabase } from './points-db.js';
import { inWindows, PUBLISH_WINDOW, type TransportTarget } from './transport-target.js';

/** How a pair of rows consumes: one by one (`batchSize` 1) or in batches. */
export interface RowShape {
  readonly concurrency: number;
  readonly batchSize: number;
}

const rowName = (side: string, target: string, shape: RowShape): string =>
  `${side}:${target}${shape.batchSize > 1 ? ':batch' : ''}`;

/** Where a pipeline's outcomes go: the current drain's countdown; anything but `executed` stops it. */
export class OutcomeSink {
  run: DrainRun | undefined;

  readonly onOutcome = (outcome: Outcome): void => {
    if (outcome.kind === 'executed') this.run?.progress.tick();
    else this.run?.progress.fail(new Error(`outcome ${outcome.kind} for ${outcome.key ?? '?'}`));
  };
}

/** `raw:<t>` or `raw:<t>:batch`: the raw client consuming, the claim and the write by hand. */
export function rawRow(
  target: TransportTarget,
  db: PointsDatabase,
  scope: string,
  shape: RowShape,
): DrainContender {
  return {
    name: rowName('raw', target.name, shape),
    concurrency: shape.concurrency,
    async open() {
      const raw = await target.raw(`${scope}-raw${shape.batchSize > 1 ? 'b' : ''}`, shape);
      return {
        publish: (run) =>
          raw.publish(Array.from({ length: run.count }, (_, n) => JSON.stringify(payment(run.tag, n)))),
        consume: (run) =>
          raw.consume(
            (messages) => {
              const [only] = messages;
              return shape.batchSize === 1 && only !== undefined && messages.length === 1
                ? db.rawOne(only)
                : db.rawBatch(messages);
            },
            (count) => run.progress.tick(count),
            (error) => run.progress.fail(error),
          ),
        close: () => raw.close(),
      };
    },
  };
}

/**
 * `oncemq-transport:<t>`, one by one: the oncemq transport's subscription with a processor that does
 * the raw row's transaction by hand (`rawOne`) and answers an ack. Beside `raw:<t>` and `oncemq:<t>`
 * it splits the gap between them into the transport's share and the pipeline's.
 */
export function transportOnlyRow(
  target: TransportTarget,
  db: PointsDatabase,
  scope: string,
  concurrency: number,
): DrainContender {
  return {
    name: `oncemq-transport:${target.name}`,
    concurrency,
    baseline: `raw:${target.name}`,
    ...(target.note === undefined ? {} : { note: target.note }),
    async open() {
      const { transport, cleanup } = await target.open(`${scope}-tr`);
      let run: DrainRun | undefined;
      const processor: Processor = {
        async process(envelope): Promise<ExecutedOutcome> {
          const started = performance.now();
          await db.rawOne({ body: envelope.body, brokerId: envelope.brokerId });
          run?.progress.tick();
          return {
            kind: 'executed',
            action: 'ack',
            mode: 'transactional',
            group: GROUP,
            key: envelope.headers[KEY_HEADER] ?? null,
            topic: envelope.topic,
            brokerId: envelope.brokerId,
            deliveryCount: envelope.deliveryCount,
            elapsedMs: performance.now() - started,
            attempt: 1,
            reclaimed: false,
            leaseLost: false,
          };
        },
      };
      await (await transport.subscribe(GROUP, [TOPIC], processor, { concurrency })).close();
      return {
        publish: (next) =>
          inWindows(next.count, PUBLISH_WINDOW, (n) => {
            const body = payment(next.tag, n);
            return transport.publish({ topic: TOPIC, key: body.eventId, body });
          }),
        consume: async (next) => {
          run = next;
          const subscription = await transport.subscribe(GROUP, [TOPIC], processor, { concurrency });
          return { stop: () => subscription.close() };
        },
        close: async () => {
          await transport.close();
          await cleanup();
        },
      };
    },
  };
}

/** `oncemq:<t>` or `oncemq:<t>:batch`: the transport's subscription driving the pipeline. */
export function oncemqRow(
  target: TransportTarget,
  db: PointsDatabase,
  scope: string,
  shape: RowShape,
): DrainContender {
  const batches = shape.batchSize > 1;
  const name = rowName('oncemq', target.name, shape);
  return {
    name,
    concurrency: shape.concurrency,
    baseline: rowName('raw', target.name, shape),
    ...(target.note === undefined ? {} : { note: target.note }),
    async open() {
      const { transport, cleanup } = await target.open(`${scope}-mq${batches ? 'b' : ''}`);
      const sink = new OutcomeSink();
      const pipeline: Pipeline = batches ? db.batchPipeline(sink.onOutcome) : db.pipeline(sink.onOutcome);
      // One by one: a processor without processBatch, so every transport hands deliveries to process().
      const processor: Processor = batches ? pipeline : { process: (envelope) => pipeline.process(envelope) };
      const options: SubscribeOptions = {
        concurrency: shape.concurrency,
        ...(batches ? { batchSize: shape.batchSize } : {}),
      };
      // The group exists before the first message is published (a new group may start at the end).
      await (await transport.subscribe(GROUP, [TOPIC], processor, options)).close();
      return {
        publish: (run) =>
          inWindows(run.count, PUBLISH_WINDOW, (n) => {
            const body = payment(run.tag, n);
            return transport.publish({ topic: TOPIC, key: body.eventId, body });
          }),
        consume: async (run) => {
          sink.run = run;
          const subscription = await transport.subscribe(GROUP, [TOPIC], processor, options);
          return { stop: () => subscription.close() };
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
