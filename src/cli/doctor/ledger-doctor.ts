import { errorText } from '../../core/errors.js';
import type { DoctorSettings, Finding } from './findings.js';
import {
  clockFinding,
  readSkew,
  retentionFinding,
  sizeFinding,
  skipped,
  stuckFinding,
  type LedgerSize,
} from './ledger-checks.js';

/**
 * What `oncemq doctor` reads from one kind of ledger. Every method only reads: the inspector of a SQL
 * ledger opens its connection read-only where the database allows it, and none creates a file,
 * schema or table.
 */
export interface LedgerInspector {
  /** The store's name (`postgres`) and where it is, for messages. */
  readonly store: string;
  readonly location: string;
  /** The retention the ledger keeps finished rows for when none is given. */
  readonly defaultRetentionMs: number;
  /** How the retention is called on this ledger (a key TTL on Redis). */
  readonly retentionName?: string;
  /** The `oncemq ledger stuck …` command for this ledger, for the stuck check's fix. */
  readonly stuckCommand: string;
  /** `ledger.schema`; `present` false when the table (or file, schema, database) is missing. */
  schema(): Promise<{ readonly present: boolean; readonly finding: Finding }>;
  /** The database's clock in epoch milliseconds, or why it cannot be compared. */
  serverNowMs: (() => Promise<number>) | string;
  size(nowMs: number): Promise<LedgerSize>;
  /** PROCESSING rows whose lease ended before `nowMs`; undefined: the ledger keeps no such rows apart. */
  stuck(nowMs: number, group: string | undefined): Promise<number | undefined>;
  /** The database's own settings that break the promise or stall it. */
  settings(): Promise<Finding[]>;
  close(): Promise<void>;
}

export interface LedgerDoctorOptions {
  /** This process's clock (epoch ms); a test shifts it to see `ledger.clock` fail. @default Date.now */
  readonly clock?: () => number;
}

async function guarded(check: string, read: () => Promise<Finding | Finding[]>): Promise<Finding[]> {
  try {
    const found = await read();
    return Array.isArray(found) ? found : [found];
  } catch (error) {
    return [skipped(check, `could not read: ${errorText(error)}`)];
  }
}

/** Every ledger check on an opened inspector; checks of the table are skipped when it is missing. */
export async function inspectLedger(
  inspector: LedgerInspector,
  settings: DoctorSettings,
  options: LedgerDoctorOptions = {},
): Promise<Finding[]> {
  const clock = options.clock ?? Date.now;
  const findings: Finding[] = [
    retentionFinding(settings, inspector.defaultRetentionMs, inspector.retentionName),
  ];
  const schema = await inspector.schema();
  findings.push(schema.finding);
  const { serverNowMs } = inspector;
  findings.push(
    ...(typeof serverNowMs === 'string'
      ? [skipped('ledger.clock', serverNowMs)]
      : await guarded('ledger.clock', async () =>
          clockFinding(await readSkew(serverNowMs, clock), settings.leaseMs, inspector.store),
        )),
  );
  if (schema.present) {
    findings.push(...(await guarded('ledger.size', async () => sizeFinding(await inspector.size(clock())))));
    findings.push(
      ...(await guarded('ledger.stuck', async () => {
        const count = await inspector.stuck(clock(), settings.group);
        return count === undefined
          ? skipped('ledger.stuck', `the ${inspector.store} ledger keeps no stuck rows apart`)
          : stuckFinding(count, settings.group, inspector.stuckCommand);
      })),
    );
  } else {
    const why = 'the ledger table is missing';
    findings.push(skipped('ledger.size', why), skipped('ledger.stuck', why));
  }
  findings.push(...(await guarded('ledger.settings', () => inspector.settings())));
  return findings;
}

/** Opens an inspector, runs every check, and closes it; a ledger that cannot be reached is a failure. */
export async function ledgerFindings(
  open: () => Promise<LedgerInspector>,
  store: string,
  settings: DoctorSettings,
  options: LedgerDoctorOptions = {},
): Promise<Finding[]> {
  let inspector: LedgerInspector;
  try {
    inspector = await open();
  } catch (error) {
    return [
      {
        check: 'ledger.connection',
        status: 'fail',
        summary: `cannot reach the ${store} ledger: ${errorText(error)}`,
        fix: 'check --url (and that the database and its user exist); doctor creates nothing',
      },
    ];
  }
  try {
    return await inspectLedger(inspector, settings, options);
  } finally {
    await inspector.close().catch(() => undefined);
  }
}
