import { runDoctor, type Finding } from './internal.js';

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
