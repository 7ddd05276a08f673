import type { PipelineMetrics } from '../../consumer/metrics.js';
import { validateGroup } from '../../core/group.js';
import type { Ledger, LedgerRecord } from '../../ledger/ledger.js';
import type { DeadLetter } from '../../transport/dead-letters.js';
import { part, type DashboardSources, type Part } from './dashboard-sources.js';

/** Rows of each list the page shows at most. */
export const DASHBOARD_ROWS = 100;
/** Bytes of a dead letter's body the page shows. */
export const DASHBOARD_BODY_BYTES = 4096;
/** Dead letters one replay or discard takes at most. */
export const DASHBOARD_MAX_IDS = 1000;

/** Wrong input to an action: answered 400 with the message. */
export class DashboardInputError extends Error {
  override name = 'DashboardInputError';
}

/** A ledger row as the page gets it (dates in ISO 8601). */
export interface ClaimRow {
  readonly group: string;
  readonly key: string;
  readonly status: string;
  readonly owner: string | null;
  readonly attempt: number;
  readonly leaseUntil: string | null;
  readonly brokerId: string | null;
  readonly topic: string | null;
  readonly remark: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** A dead letter as the page gets it: the body as text (UTF-8, else base64), cut at {@link DASHBOARD_BODY_BYTES}. */
export interface DeadLetterRow {
  readonly id: string;
  readonly group: string;
  readonly topic: string;
  readonly key: string | null;
  readonly reason: string;
  readonly error: string | null;
  readonly deliveryCount: number;
  readonly deadAt: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly bodyEncoding: 'utf8' | 'base64';
  readonly bodyBytes: number;
}

/** Everything the page polls for. */
export interface DashboardState {
  readonly at: string;
  readonly store: string | null;
  readonly transport: string | null;
  readonly metricsSource: string | null;
  readonly groups: readonly string[];
  readonly metrics: Part<PipelineMetrics> | null;
  readonly stuck: Part<readonly ClaimRow[]> | null;
  readonly failed: Part<readonly ClaimRow[]> | null;
  readonly deadLetters: Readonly<Record<string, Part<readonly DeadLetterRow[]>>> | null;
}

function claimRow(record: LedgerRecord): ClaimRow {
  return {
    group: record.group,
    key: record.key,
    status: record.status,
    owner: record.owner,
    attempt: record.attempt,
    leaseUntil: record.leaseUntil?.toISOString() ?? null,
    brokerId: record.brokerId,
    topic: record.topic,
    remark: record.remark,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function deadLetterRow(letter: DeadLetter): DeadLetterRow {
  const bytes = letter.body.subarray(0, DASHBOARD_BODY_BYTES);
  let body: string;
  let bodyEncoding: DeadLetterRow['bodyEncoding'] = 'utf8';
  try {
    body = utf8.decode(bytes, { stream: bytes.length < letter.body.length });
  } catch {
    body = Buffer.from(bytes).toString('base64');
    bodyEncoding = 'base64';
  }
  return {
    id: letter.id,
    group: letter.group,
    topic: letter.topic,
    key: letter.key,
    reason: String(letter.reason),
    error: letter.error,
    deliveryCount: letter.deliveryCount,
    deadAt: letter.deadAt.toISOString(),
    headers: letter.headers,
    body,
    bodyEncoding,
    bodyBytes: letter.body.length,
  };
}

function inspectable(ledger: Ledger): Ledger {
  if (!ledger.capabilities.inspect) {
    throw new DashboardInputError(`the ${ledger.name} ledger cannot list or reset rows`);
  }
  return ledger;
}

function field(body: unknown, name: string): unknown {
  return typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[name] : undefined;
}

function groupOf(body: unknown): string {
  try {
    return validateGroup(field(body, 'group'));
  } catch (error) {
    throw new DashboardInputError((error as Error).message);
  }
}

function stringField(body: unknown, name: string): string {
  const value = field(body, name);
  if (typeof value !== 'string' || value === '' || value.length > 1024) {
    throw new DashboardInputError(`${name} must be a non-empty string of at most 1024 characters`);
  }
  return value;
}

function idsOf(body: unknown): string[] {
  const ids = field(body, 'ids');
  if (
    !Array.isArray(ids) ||
    ids.length === 0 ||
    ids.length > DASHBOARD_MAX_IDS ||
    !ids.every((id) => typeof id === 'string' && id !== '' && id.length <= 256)
  ) {
    throw new DashboardInputError(`ids must be a list of 1 to ${DASHBOARD_MAX_IDS} dead-letter ids`);
  }
  return ids as string[];
}

/** What a reset answers: whether the row went, and why not. */
export interface ResetAnswer {
  readonly reset: boolean;
  readonly reason: string;
}

/**
 * The dashboard's JSON API over its sources: one state read for the page's poll, and the actions
 * (reset a claim, replay or discard dead letters). Reads never create or migrate anything.
 */
export class DashboardApi {
  constructor(private readonly sources: DashboardSources) {}

  async state(): Promise<DashboardState> {
    const { ledger, deadLetters, metrics, groups } = this.sources;
    const rows = async (status: 'PROCESSING' | 'FAIL'): Promise<readonly ClaimRow[]> => {
      const opened = inspectable(await (ledger as NonNullable<typeof ledger>).open());
      const records = await opened.list({
        status,
        limit: DASHBOARD_ROWS,
        ...(status === 'PROCESSING' ? { leaseExpiredBefore: new Date() } : {}),
      });
      return records.map(claimRow);
    };
    const letters = async (group: string): Promise<readonly DeadLetterRow[]> => {
      const queue = await (deadLetters as NonNullable<typeof deadLetters>).open();
      return (await queue.list({ group, limit: DASHBOARD_ROWS })).map(deadLetterRow);
    };
    const [metricsPart, stuck, failed, dead] = await Promise.all([
      metrics === undefined ? null : part(() => metrics.read()),
      ledger === undefined ? null : part(() => rows('PROCESSING')),
      ledger === undefined ? null : part(() => rows('FAIL')),
      deadLetters === undefined
        ? null
        : Promise.all(groups.map(async (group) => [group, await part(() => letters(group))] as const)),
    ]);
    return {
      at: new Date().toISOString(),
      store: ledger?.location ?? null,
      transport: deadLetters === undefined ? null : `${deadLetters.transport} ${deadLetters.location}`,
      metricsSource: metrics === undefined ? null : `${metrics.kind} ${metrics.location}`,
      groups,
      metrics: metricsPart,
      stuck,
      failed,
      deadLetters: dead === null ? null : Object.fromEntries(dead),
    };
  }

  /**
   * Resets a stuck claim, only if the row is still the one the page showed: the PROCESSING row goes
   * through the ledger's owner-checked `release`, and only once its lease has ended, so a live owner
   * that renewed or a new owner that reclaimed keeps its row. A FAIL row is not reset here: the next
   * delivery (or a replay) reclaims it anyway, and deleting it could race with that reclaim.
   */
  async resetClaim(body: unknown): Promise<ResetAnswer> {
    if (this.sources.ledger === undefined) throw new DashboardInputError('no ledger: start with --store');
    const group = groupOf(body);
    const key = stringField(body, 'key');
    const attempt = field(body, 'attempt');
    if (!Number.isSafeInteger(attempt) || (attempt as number) < 1) {
      throw new DashboardInputError('attempt must be the whole number the page showed');
    }
    const ledger = inspectable(await this.sources.ledger.open());
    const row = await ledger.get(group, key);
    if (row === undefined) return { reset: false, reason: 'no row: nothing to reset' };
    if (row.attempt !== attempt) {
      return { reset: false, reason: `the row changed: attempt ${row.attempt}, not ${String(attempt)}` };
    }
    if (row.status === 'SUCCESS') {
      return { reset: false, reason: 'refused: the key was applied (SUCCESS); a reset would apply it again' };
    }
    if (row.status === 'FAIL') {
      return {
        reset: false,
        reason: 'not reset: a failed claim is reclaimed by its next delivery or a replay',
      };
    }
    const owner = field(body, 'owner');
    if (owner !== row.owner || row.owner === null) {
      return { reset: false, reason: 'the row changed: another owner holds the claim' };
    }
    if (row.leaseUntil !== null && row.leaseUntil.getTime() > Date.now()) {
      return { reset: false, reason: 'refused: the lease is live again (its owner renewed it)' };
    }
    try {
      await ledger.release({ group, key, owner: row.owner, attempt: row.attempt, leaseUntil: new Date(0) });
    } catch (error) {
      if ((error as Error).name === 'LeaseLostError') {
        return { reset: false, reason: 'the row changed: another owner holds the claim' };
      }
      throw error;
    }
    return { reset: true, reason: 'reset: the next delivery claims the key afresh' };
  }

  /** Replays dead letters of a group: new copies to that group only (see DeadLetters.replay). */
  replay(body: unknown): Promise<{ readonly requested: number; readonly done: number }> {
    return this.#deadLetterAction(body, (queue, group, ids) => queue.replay(group, ids));
  }

  /** Deletes dead letters of a group for good. */
  discard(body: unknown): Promise<{ readonly requested: number; readonly done: number }> {
    return this.#deadLetterAction(body, (queue, group, ids) => queue.purge(group, ids));
  }

  async #deadLetterAction(
    body: unknown,
    act: (
      queue: Awaited<ReturnType<NonNullable<DashboardSources['deadLetters']>['open']>>,
      group: string,
      ids: string[],
    ) => Promise<number>,
  ): Promise<{ readonly requested: number; readonly done: number }> {
    const source = this.sources.deadLetters;
    if (source === undefined) throw new DashboardInputError('no dead-letter queue: start with --transport');
    const group = groupOf(body);
    const ids = idsOf(body);
    const done = await act(await source.open(), group, ids);
    return { requested: ids.length, done };
  }
}
