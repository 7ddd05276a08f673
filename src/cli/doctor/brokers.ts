import type { BrokerTarget, DoctorSettings, Finding } from './findings.js';

/**
 * The broker checks of `oncemq doctor` for `target.transport`: what the broker is set to that breaks
 * the promise or its cost, read and never written.
 */
export async function brokerFindings(target: BrokerTarget, settings: DoctorSettings): Promise<Finding[]> {
  await Promise.resolve(settings);
  return [
    {
      check: `${target.transport}.settings`,
      status: 'skip',
      summary: `no checks of ${target.transport}'s settings yet`,
    },
  ];
}
