import { isDeepStrictEqual, inspect } from 'node:util';
import type { Envelope } from '../core/envelope.js';
import { ConfigError, OncemqError } from '../core/errors.js';
import { SILENT_LOGGER } from '../core/logger.js';
import type { Outcome } from '../core/outcome.js';
import { createPipeline, type Pipeline, type PipelineConfig } from '../consumer/pipeline.js';
import { RetryPolicy } from '../core/retry-policy.js';
import { injectCommitFailures } from './commit-failure.js';
import { InjectedFault } from './fault-injector.js';

/** Why a rollback check failed. */
export type RollbackCheckFailure =
  /** The handler's effect survived the rollback of the claim's transaction: it wrote through another connection. */
  | 'effect-escaped'
  /** `observe()` saw no change even after the deliveries committed: the check would prove nothing. */
  | 'no-effect-observed'
  /** A delivery never reached the handler (a missing key, a duplicate of an earlier run, a bad payload…). */
  | 'not-run';

/** A rollback check that failed; `reason` says how, the message names the handler and the keys. */
export class RollbackCheckError extends OncemqError {
  override readonly name = 'RollbackCheckError';
  /** How the check failed: an escaped effect, an `observe()` that sees nothing, or a delivery that never ran. */
  readonly reason: RollbackCheckFailure;

  constructor(reason: RollbackCheckFailure, message: string, options?: ErrorOptions) {
    super('rollback-check', message, options);
    this.reason = reason;
  }
}

/** Input of {@link checkRollback}. */
export interface RollbackCheckOptions<Tx, T> {
  /**
   * The configuration of the pipeline under test, as given to `createPipeline` (its ledger, group,
   * handler or batchHandler, key…), in transactional mode.
   */
  readonly pipeline: PipelineConfig<Tx, T>;
  /** Deliveries whose keys no run has claimed yet (fresh keys per test run). */
  readonly envelopes: readonly Envelope[];
  /**
   * Reads the state the handler's effects show in, through a connection of its own (the rows of the
   * tables it writes, a balance, a count): compared with Node's deep strict equality.
   */
  readonly observe: () => unknown;
  /**
   * Then processes the deliveries for real and checks that `observe()` changed, so that a check of a
   * state the handler never touches cannot pass. Leaves the committed effects and ledger rows behind.
   * @default true
   */
  readonly control?: boolean;
}

/** What a passed rollback check saw. */
export interface RollbackReport {
  /** Deliveries whose handler ran and whose transaction was rolled back. */
  readonly rolledBack: number;
  /** What `observe()` read before the deliveries ran. */
  readonly before: unknown;
  /** What `observe()` read after their transactions rolled back: equal to `before`. */
  readonly afterRollback: unknown;
  /** The state once the deliveries committed (`control`), else undefined. */
  readonly afterCommit: unknown;
}

function show(value: unknown): string {
  return inspect(value, { depth: 4, breakLength: Infinity, maxArrayLength: 10, maxStringLength: 200 });
}

function handlerName<Tx, T>(config: PipelineConfig<Tx, T>): string {
  const fn = config.handler ?? config.batchHandler;
  const name = fn?.name;
  return `handler ${name === undefined || name === '' ? '(anonymous)' : `'${name}'`} of group '${config.group}'`;
}

function run(pipeline: Pipeline, envelopes: readonly Envelope[], batch: boolean): Promise<Outcome[]> {
  if (batch) return pipeline.processBatch(envelopes);
  return envelopes.reduce<Promise<Outcome[]>>(
    async (done, envelope) => [...(await done), await pipeline.process(envelope)],
    Promise.resolve([]),
  );
}

/** Whether an outcome is the injected commit failure, i.e. the handler ran and its transaction rolled back. */
function rolledBack(outcome: Outcome): boolean {
  return (
    outcome.kind === 'retry' && outcome.error instanceof Error && outcome.error.cause instanceof InjectedFault
  );
}

/**
 * Proves in your own test suite that a handler's effects live in the claim's transaction: runs each
 * delivery through the pipeline with its transaction rolled back after the handler succeeded (a
 * refused COMMIT), and checks that `observe()` reads the same state before and after. A handler that
 * wrote through another connection — the application's own ORM instance or pool instead of `ctx.tx`
 * — leaves its effect behind, and the check throws a {@link RollbackCheckError} (`effect-escaped`)
 * naming the handler, the keys and both states: in production that effect would be applied again by
 * the redelivery of every message whose commit or ack was lost.
 *
 * With `control` (the default) the deliveries are then processed for real and `observe()` must
 * change (`no-effect-observed` otherwise). Every delivery must reach the handler (`not-run` otherwise:
 * use keys no earlier run claimed). Leased mode is refused: its effects are outside the database by design.
 */
export async function checkRollback<Tx, T>(options: RollbackCheckOptions<Tx, T>): Promise<RollbackReport> {
  const { pipeline: config, envelopes } = options;
  if (envelopes.length === 0) throw new ConfigError('envelopes', 'give at least one delivery to check');
  const batch = config.handler === undefined && config.batchHandler !== undefined;
  const quiet = { logger: SILENT_LOGGER, telemetry: false as const, onOutcome: undefined };
  const probe = createPipeline<Tx, T>({
    ...config,
    ...quiet,
    retry: RetryPolicy.none(),
    ledger: injectCommitFailures(config.ledger, { commitFailure: () => true }),
  });
  if (probe.mode !== 'transactional') {
    throw new ConfigError(
      'mode',
      'the rollback check is for transactional mode (leased effects are outside the database)',
    );
  }
  const who = handlerName(config);
  const before = await options.observe();
  const outcomes = await run(probe, envelopes, batch);
  const missed = outcomes.filter((outcome) => !rolledBack(outcome));
  if (missed.length > 0) {
    const list = missed.map(
      (o) => `${o.key ?? '(no key)'}: ${o.kind}${'reason' in o ? ` (${o.reason})` : ''}`,
    );
    throw new RollbackCheckError(
      'not-run',
      `${who}: ${missed.length} of ${outcomes.length} deliveries never reached a rolled-back commit (${list.join('; ')}); ` +
        'give deliveries whose keys no earlier run claimed',
    );
  }
  const afterRollback = await options.observe();
  const keys = outcomes.map((o) => o.key).join(', ');
  if (!isDeepStrictEqual(before, afterRollback)) {
    throw new RollbackCheckError(
      'effect-escaped',
      `${who} wrote outside the claim's transaction: its effect survived the rollback of key(s) ${keys} ` +
        `(before: ${show(before)}; after the rollback: ${show(afterRollback)}). Write through ctx.tx ` +
        '(or an ORM adapter whose ctx.tx is your ORM’s transaction), never through another connection or pool: ' +
        'a redelivery after a lost commit or ack would apply that effect again',
    );
  }
  if (options.control === false)
    return { rolledBack: outcomes.length, before, afterRollback, afterCommit: undefined };
  const real = createPipeline<Tx, T>({ ...config, ...quiet });
  const committed = await run(real, envelopes, batch);
  const failed = committed.filter((o) => o.kind !== 'executed');
  if (failed.length > 0) {
    const list = failed.map((o) => `${o.key ?? '(no key)'}: ${o.kind}`);
    throw new RollbackCheckError(
      'not-run',
      `${who}: the control run did not execute every delivery (${list.join('; ')})`,
    );
  }
  const afterCommit = await options.observe();
  if (isDeepStrictEqual(before, afterCommit)) {
    throw new RollbackCheckError(
      'no-effect-observed',
      `${who}: observe() read the same state after the deliveries committed (${show(afterCommit)}), ` +
        'so it cannot see a rolled-back effect either: observe the tables the handler writes',
    );
  }
  return { rolledBack: outcomes.length, before, afterRollback, afterCommit };
}
