import { expect } from 'vitest';
import { RetryPolicy } from 'oncemq';
import { runDoctor, type DoctorSettings, type Finding } from './internal.js';

/**
 * The deployment the broker checks of the doctor tests compare against: 1 immediate retry and delays of
 * 10 s and 5 min (4 deliveries, horizon 5m10s), a replay margin of a day, a handler of up to a minute.
 */
export const DOCTOR_SETTINGS: DoctorSettings = Object.freeze({
  retry: new RetryPolicy({ name: 'doctor-test', immediate: 1, delays: ['10s', '5m'] }),
  replayMarginMs: 86_400_000,
  handlerTimeoutMs: 60_000,
});

/** The one finding of `check`, failing the test with every finding listed when there is not exactly one. */
export function findingOf(findings: readonly Finding[], check: string): Finding {
  const found = findings.filter((finding) => finding.check === check);
  expect(found, `one ${check} in ${JSON.stringify(findings, null, 2)}`).toHaveLength(1);
  return found[0] as Finding;
}

/** The status of every finding, by check (several of one check joined with `,`). */
export function statuses(findings: readonly Finding[]): Record<string, string> {
  const map: Record<string, string> = {};
  for (const { check, status } of findings)
    map[check] = map[check] === undefined ? status : `${map[check]},${status}`;
  return map;
}

/** What one `oncemq doctor` run found, by check. */
export interface DoctorRun {
  readonly findings: readonly Finding[];
  /** The finding of `check`; throws when the run has none, so a test names what it expected. */
  of(check: string): Finding;
  /** The checks that failed. */
  readonly failed: readonly string[];
}

/** Runs the checks of `oncemq doctor ARGS` in this process, with `clock` as this host's clock. */
export async function doctor(args: readonly string[], clock?: () => number): Promise<DoctorRun> {
  const { findings } = await runDoctor(args, clock === undefined ? {} : { clock });
  return {
    findings,
    of(check) {
      const found = findings.find((finding) => finding.check === check);
      if (found === undefined) throw new Error(`no ${check} finding in ${JSON.stringify(findings)}`);
      return found;
    },
    failed: findings.filter((finding) => finding.status === 'fail').map((finding) => finding.check),
  };
}
