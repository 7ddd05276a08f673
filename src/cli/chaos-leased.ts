import { createPipeline } from '../consumer/pipeline.js';
import { LeaseLostError } from '../core/errors.js';
import { SILENT_LOGGER } from '../core/logger.js';
import type { Claim, ClaimRequest, ClaimResult, Ledger } from '../ledger/ledger.js';
import { DEMO_GROUP, DEMO_RETRY, type DemoConsumer, type PaymentSucceeded } from './demo-consumer.js';
import { UsageError } from './command.js';
import type { DemoStore, DemoSql } from './demo-store.js';

/**
 * The audit of a leased chaos run, one row per step each member took, written through the member's
 * own pool (outside the ledger's writes): `claim` (a won claim: its owner token and attempt),
 * `apply` (the handler's effect), `complete` (a completion the ledger accepted) and `refused` (one
 * it answered with "lease lost").
 */
export const AUDIT_TABLE = 'chaos_audit';

export const CREATE_AUDIT = `CREATE TABLE ${AUDIT_TABLE} (msg_key VARCHAR(200) NOT NULL, attempt INTEGER NOT NULL,
  owner VARCHAR(64) NOT NULL, member VARCHAR(64) NOT NULL, kind VARCHAR(16) NOT NULL)`;

type AuditKind = 'claim' | 'apply' | 'complete' | 'refused';

/** Binds the key, the attempt, the owner, the member and the kind. */
const INSERT_AUDIT = `INSERT INTO ${AUDIT_TABLE} (msg_key, attempt, owner, member, kind) VALUES (?, ?, ?, ?, ?)`;

/**
 * The store's ledger with each won claim and each completion written to the audit table. A claim is
 * recorded before its handler may run (a claim that cannot be recorded fails, as an unreachable
 * ledger does: its lease runs out and another copy reclaims the key), so the owner of every
 * completion has its claim in the audit.
 */
export function auditedLedger<Tx>(ledger: Ledger<Tx>, sql: DemoSql, member: string): Ledger<Tx> {
  const record = async (kind: AuditKind, claim: Claim): Promise<void> => {
    await sql(INSERT_AUDIT, [claim.key, claim.attempt, claim.owner, member, kind]);
  };
  const claim = async (request: ClaimRequest): Promise<ClaimResult> => {
    const claimed = await ledger.claim(request);
    if (claimed.status === 'acquired' || claimed.status === 'reclaimed') await record('claim', claimed.claim);
    return claimed;
  };
  const complete = async (held: Claim, result: string | null): Promise<void> => {
    try {
      await ledger.complete(held, result);
    } catch (error) {
      if (error instanceof LeaseLostError) await record('refused', held).catch(() => undefined);
      throw error;
    }
    // the completion stands whether or not its audit row lands: the checker reads the ledger's row too
    await record('complete', held).catch(() => undefined);
  };
  return new Proxy(ledger, {
    get(target, property) {
      if (property === 'claim') return claim;
      if (property === 'complete') return complete;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * The payment-to-points consumer in leased mode: an owner-checked lease renewed while the handler
 * runs, and an effect outside the ledger's transaction (an `apply` row through the member's pool),
 * written only while the lease is held — a write already sent when the lease is lost still lands.
 */
export function leasedConsumer(store: DemoStore, member: string, leaseMs: number): DemoConsumer {
  const { sql } = leasedStore(store);
  const pipeline = createPipeline<unknown, PaymentSucceeded>({
    ledger: auditedLedger(store.ledger, sql, member),
    group: DEMO_GROUP,
    mode: 'leased',
    lease: leaseMs,
    retry: DEMO_RETRY,
    logger: SILENT_LOGGER,
    handler: async (event, ctx) => {
      ctx.signal.throwIfAborted();
      await sql(INSERT_AUDIT, [event.eventId, ctx.attempt, '', member, 'apply']);
    },
  });
  return {
    processor: pipeline,
    deliveries: () => pipeline.metrics().deliveries,
    metrics: () => pipeline.metrics(),
  };
}

/** What the audit and the ledger say about a leased run. */
export interface LeasedAudit {
  /** Events with at least one `apply` row. */
  readonly applied: number;
  /** `apply` rows in all. */
  readonly applications: number;
  /** Events applied more than once (an effect outside the transaction is at-least-once). */
  readonly applicationsDoubled: number;
  /** Claims that took over a key (attempt > 1): an expired lease of a cut or killed owner. */
  readonly takeovers: number;
  /** Completions the ledger refused: the owner's lease had ended and another owner had the key. */
  readonly staleCompletesRefused: number;
  /**
   * Completions the ledger accepted from an owner that was not the key's last claimant, extra
   * accepted completions of one key, and SUCCESS rows whose owner is not the last claimant's: 0.
   */
  readonly staleCompletesAccepted: number;
  /** Keys whose completion by a stale owner was accepted, a few. */
  readonly staleKeys: readonly string[];
  /** `apply` rows per event key (for the effect checker: lost and doubled effects). */
  readonly applies: ReadonlyMap<string, number>;
}

interface Step {
  readonly key: string;
  readonly attempt: number;
  readonly owner: string;
  readonly kind: string;
}

/** Reads the audit and the group's SUCCESS rows of the ledger table, after the members stopped. */
export async function leasedAudit(sql: DemoSql, ledgerTable: string): Promise<LeasedAudit> {
  const steps = (await sql(`SELECT msg_key, attempt, owner, kind FROM ${AUDIT_TABLE}`)).map((row): Step => ({
    key: String(row.msg_key),
    attempt: Number(row.attempt),
    owner: String(row.owner),
    kind: String(row.kind),
  }));
  const last = new Map<string, Step>();
  const applies = new Map<string, number>();
  const completes = new Map<string, Step[]>();
  let takeovers = 0;
  let refused = 0;
  for (const step of steps) {
    if (step.kind === 'claim') {
      if (step.attempt > 1) takeovers++;
      if ((last.get(step.key)?.attempt ?? 0) < step.attempt) last.set(step.key, step);
    } else if (step.kind === 'apply') applies.set(step.key, (applies.get(step.key) ?? 0) + 1);
    else if (step.kind === 'complete') completes.set(step.key, [...(completes.get(step.key) ?? []), step]);
    else refused++;
  }
  const stale = new Set<string>();
  let staleCompletesAccepted = 0;
  const isLast = (step: { key: string; owner: string; attempt: number }): boolean => {
    const claim = last.get(step.key);
    return claim !== undefined && claim.owner === step.owner && claim.attempt === step.attempt;
  };
  for (const [key, accepted] of completes) {
    // completions by an owner that was not the last claimant, and a last claimant's beyond its first
    const byLast = accepted.filter(isLast).length;
    const wrong = accepted.length - byLast + Math.max(0, byLast - 1);
    if (wrong > 0) stale.add(key);
    staleCompletesAccepted += wrong;
  }
  const rows = await sql(
    `SELECT msg_key, owner, attempt FROM ${ledgerTable} WHERE consumer_group = ? AND status = 'SUCCESS'`,
    [DEMO_GROUP],
  );
  for (const row of rows) {
    const step = { key: String(row.msg_key), owner: String(row.owner), attempt: Number(row.attempt) };
    if (isLast(step)) continue;
    stale.add(step.key);
    staleCompletesAccepted++;
  }
  const counts = [...applies.values()];
  return {
    applied: applies.size,
    applications: counts.reduce((sum, n) => sum + n, 0),
    applicationsDoubled: counts.filter((n) => n > 1).length,
    takeovers,
    staleCompletesRefused: refused,
    staleCompletesAccepted,
    staleKeys: [...stale].slice(0, 20),
    applies,
  };
}

/**
 * How far a leased run is, for the harness's wait: events whose key the ledger completed, and the
 * audit's rows (still while the members are quiet).
 */
export async function leasedProgress(
  sql: DemoSql,
  ledgerTable: string,
): Promise<{ readonly events: number; readonly rows: number }> {
  const [done] = await sql(
    `SELECT COUNT(*) AS n FROM ${ledgerTable} WHERE consumer_group = ? AND status = 'SUCCESS'`,
    [DEMO_GROUP],
  );
  const [audit] = await sql(`SELECT COUNT(*) AS n FROM ${AUDIT_TABLE}`);
  return { events: Number(done?.n ?? 0), rows: Number(audit?.n ?? 0) };
}

/** The server store's statements and ledger table a leased run audits through; other stores cannot. */
export function leasedStore(store: DemoStore): { readonly sql: DemoSql; readonly ledgerTable: string } {
  const { sql, ledgerTable } = store;
  if (sql === undefined || ledgerTable === undefined) {
    throw new UsageError(
      '--mode leased needs --store postgres or mysql: the run audits through the database',
    );
  }
  return { sql, ledgerTable };
}

/** The leased figures of a run's result (none for a transactional run). */
export function leasedFigures(
  leaseMs: number | undefined,
  audit: LeasedAudit | undefined,
):
  | { mode: 'transactional' }
  | ({ mode: 'leased'; leaseMs: number } & Omit<LeasedAudit, 'applies' | 'applied'>) {
  if (leaseMs === undefined || audit === undefined) return { mode: 'transactional' };
  return {
    mode: 'leased',
    leaseMs,
    applications: audit.applications,
    applicationsDoubled: audit.applicationsDoubled,
    takeovers: audit.takeovers,
    staleCompletesRefused: audit.staleCompletesRefused,
    staleCompletesAccepted: audit.staleCompletesAccepted,
    staleKeys: audit.staleKeys,
  };
}
