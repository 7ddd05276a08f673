import { expect } from 'vitest';
import { RetryPolicy } from 'oncemq';
import type { DoctorSettings, Finding } from './internal.js';

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
