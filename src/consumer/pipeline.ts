import type { Envelope } from '../core/envelope.js';
import { ClosedError, ConfigError } from '../core/errors.js';
import type { Outcome } from '../core/outcome.js';
import { decideExisting } from '../ledger/claim-decision.js';
import type { LedgerRecord } from '../ledger/ledger.js';
import { runBatch } from './batch.js';
import { readDelivery, type Readable, type ReadDelivery, type ReaderConfig } from './delivery-reader.js';
import { DeliveryRunner } from './delivery-runner.js';
import type { Mode } from './handler-context.js';
import { LeaseKeeper } from './lease-keeper.js';
import type { PipelineMetrics } from './metrics.js';
import { OutcomeBuilder } from './outcome-builder.js';
import { OutcomeRecorder } from './outcome-recorder.js';
import { resolvePipelineConfig, type PipelineConfig } from './pipeline-config.js';
import type { RetryPolicy } from '../core/retry-policy.js';
import {
  NO_TELEMETRY,
  openPipelineTelemetry,
  type PipelineTelemetry,
} from '../telemetry/pipeline-telemetry.js';

export type { Decoder } from './delivery-reader.js';
export type { BatchContext, BatchEvent, BatchHandler, Handler } from './handler.js';
export { DEFAULT_PIPELINE_CONFIG } from './pipeline-config.js';
export type { PipelineConfig } from './pipeline-config.js';

/**
 * What `createPipeline(config)` returns: a {@link Processor} any transport (or your own consumer loop)
 * drives, one `process(envelope)` per delivery, acting on each outcome's `action`.
 */
export interface Pipeline {
  /** The consumer group, checked. */
  readonly group: string;
  /** The mode chosen: the configured one, else `transactional` when the ledger can share a transaction. */
  readonly mode: Mode;
  /** The retry policy in force (a configured `RetryPolicyConfig` becomes a policy). */
  readonly retry: RetryPolicy;
  /** A claim's lease in milliseconds (the configured `lease`): how long a front end may let one piece of work run. */
  readonly leaseMs: number;
  /**
   * Runs one delivery to its outcome. Never rejects for anything a message or a user function does
   * (a throw of any value becomes an outcome); the outcome says whether to ack, retry or dead-letter.
   */
  process(envelope: Envelope): Promise<Outcome>;
  /**
   * Runs a batch of deliveries to their outcomes, in order, with process()'s semantics. In
   * transactional mode on a ledger with batch claims the batch shares one claim statement and one
   * commit; a failing handler makes the batch fall back to one transaction per delivery. In leased
   * mode every claim of the batch is made at once and its lease held from then on, the handlers run
   * one after another in delivery order, and the completions are settled as they go (a Redis ledger
   * shares their round trips); a later copy of a key in the same batch is claimed at its turn.
   */
  processBatch(envelopes: readonly Envelope[]): Promise<Outcome[]>;
  /** A snapshot of the counters: outcomes by kind, duplicates by source, dead letters by reason. */
  metrics(): PipelineMetrics;
  /** Refuses further deliveries. The ledger stays open: it is the caller's. */
  close(): void;
}

/**
 * The consumer pipeline: reads each delivery's business key, claims it in the ledger, runs the
 * handler once per key and group, and says whether to ack, retry or dead-letter. The steps live in
 * three parts that one delivery and a batch both use: reading (delivery-reader), running
 * (DeliveryRunner) and recording (OutcomeRecorder).
 */
class ConsumerPipeline<Tx, T> implements Pipeline {
  readonly group: string;
  readonly mode: Mode;
  readonly retry: RetryPolicy;
  readonly leaseMs: number;
  readonly #reader: ReaderConfig<T>;
  readonly #runner: DeliveryRunner<Tx, T>;
  readonly #recorder: OutcomeRecorder;
  readonly #init: () => Promise<void>;
  readonly #outcomes: OutcomeBuilder;
  #telemetry: PipelineTelemetry = NO_TELEMETRY;
  /** Set while `@opentelemetry/api` is being loaded; deliveries wait for it (once). */
  #telemetryLoading: Promise<void> | undefined;
  #ready = false;
  #initializing: Promise<void> | undefined;
  #closed = false;

  constructor(config: PipelineConfig<Tx, T>) {
    const resolved = resolvePipelineConfig(config);
    const { ledger, group, mode, retry, leaseMs, logger } = resolved;
    this.group = group;
    this.mode = mode;
    this.retry = retry;
    this.leaseMs = leaseMs;
    this.#reader = {
      group,
      key: resolved.key,
      decode: resolved.decode,
      fingerprint: resolved.fingerprint,
      leaseMs,
    };
    this.#outcomes = new OutcomeBuilder(group, mode, retry, leaseMs, resolved.serializer);
    this.#runner = new DeliveryRunner({
      group,
      mode,
      ledger,
      handler: resolved.handler,
      batchHandler: resolved.batchHandler,
      retry,
      serializer: resolved.serializer,
      onFailure: resolved.onFailure,
      leases: new LeaseKeeper(ledger, leaseMs, resolved.renewEveryMs, logger),
      outcomes: this.#outcomes,
      outbox: resolved.outbox,
      logger,
    });
    this.#recorder = new OutcomeRecorder(group, logger, resolved.onOutcome);
    this.#init = () => ledger.init();
    if (resolved.telemetry !== false) {
      this.#telemetryLoading = openPipelineTelemetry(resolved.telemetry, { group, ledger }).then(
        (telemetry) => {
          this.#telemetryLoading = undefined;
          if (this.#closed) telemetry.close();
          else this.#telemetry = telemetry;
        },
      );
    }
  }

  /**
   * Makes the ledger ready for `deliveries`: undefined at once when it is (no promise, no frame);
   * otherwise initialises it once (a failed init is retried by the next delivery) and answers every
   * readable delivery `unavailable` when it cannot be (a ConfigError is rethrown: a ledger configured
   * wrongly fails loudly, not message by message).
   */
  #ready$(deliveries: readonly Readable<T>[], started: number): Promise<Outcome[] | undefined> | undefined {
    if (this.#ready) return undefined;
    this.#initializing ??= this.#init().then(
      () => {
        this.#ready = true;
      },
      (error: unknown) => {
        this.#initializing = undefined;
        throw error;
      },
    );
    return this.#initializing.then(
      () => undefined,
      (error: unknown) => {
        if (error instanceof ConfigError) throw error;
        return deliveries.map((delivery) =>
          this.#recorder.record(this.#runner.unavailable(delivery, error, started), delivery.trace),
        );
      },
    );
  }

  #unreadable(delivery: Extract<ReadDelivery<T>, { ok: false }>, started: number): Outcome {
    return this.#recorder.record(
      this.#outcomes.failed(delivery.envelope, delivery.key, delivery.error, started),
      delivery.trace,
    );
  }

  /** One read delivery through its mode, recorded: one reaction on the runner's promise, no async frame. */
  #one(delivery: Readable<T>, started: number): Promise<Outcome> {
    const running =
      this.mode === 'transactional'
        ? this.#runner.transactional(delivery, started)
        : this.#runner.leased(delivery, started);
    return running.then((outcome) => this.#recorder.record(outcome, delivery.trace));
  }

  process(envelope: Envelope): Promise<Outcome> {
    return this.processKnown(envelope, undefined);
  }

  /**
   * `process()`, given the key's row when the caller has just read it (the HTTP edge reads it before
   * it claims): a SUCCESS row answers without a claim, `duplicate` (or `conflict` for another
   * payload), recorded as any outcome is. A row cannot leave SUCCESS but by an operator's reset or the
   * retention's purge, so the answer is the one the claim would have given.
   */
  processKnown(envelope: Envelope, known: LedgerRecord | undefined): Promise<Outcome> {
    if (this.#closed) return Promise.reject(new ClosedError(`pipeline of group '${this.group}'`));
    const loading = this.#telemetryLoading;
    if (loading !== undefined) return loading.then(() => this.#known(envelope, known));
    return this.#known(envelope, known);
  }

  /**
   * processKnown() once telemetry is loaded. Not an async function: a delivery on a ready ledger
   * costs the runner's promise and one reaction, not a frame per step; whatever throws here is a
   * rejection all the same.
   */
  #known(envelope: Envelope, known: LedgerRecord | undefined): Promise<Outcome> {
    try {
      const started = performance.now();
      const delivery = readDelivery(this.#reader, envelope, this.#telemetry.start(envelope, started));
      if (!delivery.ok) return Promise.resolve(this.#unreadable(delivery, started));
      if (
        known?.status === 'SUCCESS' &&
        known.group === delivery.request.group &&
        known.key === delivery.key
      ) {
        const decision = decideExisting(known, delivery.request, Date.now());
        if (decision === 'duplicate' || decision === 'conflict') {
          delivery.trace.claimStarted();
          delivery.trace.claimed(decision);
          const outcome = this.#runner.notWon(delivery, { status: decision, record: known }, started);
          return Promise.resolve(this.#recorder.record(outcome, delivery.trace));
        }
      }
      const readying = this.#ready$([delivery], started);
      if (readying === undefined) return this.#one(delivery, started);
      return readying.then((unavailable) => unavailable?.[0] ?? this.#one(delivery, started));
    } catch (error) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- what was thrown, as an async function would
      return Promise.reject(error);
    }
  }

  async processBatch(envelopes: readonly Envelope[]): Promise<Outcome[]> {
    if (this.#closed) throw new ClosedError(`pipeline of group '${this.group}'`);
    if (this.#telemetryLoading !== undefined) await this.#telemetryLoading;
    const started = performance.now();
    const outcomes: (Outcome | undefined)[] = [];
    const readable: Readable<T>[] = [];
    const positions: number[] = [];
    for (const envelope of envelopes) {
      const delivery = readDelivery(this.#reader, envelope, this.#telemetry.start(envelope, started));
      if (delivery.ok) {
        positions.push(outcomes.length);
        outcomes.push(undefined);
        readable.push(delivery);
      } else {
        outcomes.push(this.#unreadable(delivery, started));
      }
    }
    if (readable.length > 0) {
      const readying = this.#ready$(readable, started);
      const unavailable = readying === undefined ? undefined : await readying;
      if (unavailable !== undefined) {
        let next = 0;
        return outcomes.map((outcome) => outcome ?? (unavailable[next++] as Outcome));
      }
      await runBatch(
        {
          runner: this.#runner,
          mode: this.mode,
          deliveries: readable,
          positions,
          one: (delivery) => this.#one(delivery, started),
          record: (outcome, trace) => this.#recorder.record(outcome, trace),
          started,
        },
        outcomes,
      );
    }
    return outcomes as Outcome[];
  }

  metrics(): PipelineMetrics {
    return this.#recorder.metrics();
  }

  close(): void {
    this.#closed = true;
    this.#telemetry.close();
  }
}

/**
 * Turns a handler into `process(envelope) → Outcome`: reads the business key, claims it in the
 * ledger, runs the handler once per key and group, and says whether to ack, retry or dead-letter.
 * Usable inside any consumer loop; oncemq's transports call it too.
 */
export function createPipeline<Tx, T = unknown>(config: PipelineConfig<Tx, T>): Pipeline {
  return new ConsumerPipeline(config);
}

/**
 * For oncemq's own front ends that read a key's row before they claim it (the HTTP edge): the
 * delivery's outcome given that row, as {@link ConsumerPipeline.processKnown} decides it. Not part of
 * the package's entry points.
 */
export function processKnown(
  pipeline: Pipeline,
  envelope: Envelope,
  known: LedgerRecord | undefined,
): Promise<Outcome> {
  return pipeline instanceof ConsumerPipeline
    ? pipeline.processKnown(envelope, known)
    : pipeline.process(envelope);
}
