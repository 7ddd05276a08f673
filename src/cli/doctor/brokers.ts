import { errorText } from '../../core/errors.js';
import type { BrokerTarget, DoctorSettings, Finding } from './findings.js';

type BrokerChecks = (target: BrokerTarget, settings: DoctorSettings) => Promise<Finding[]>;

/** The checks of each transport, by its `--transport` name, loaded when used (each loads its own client). */
const CHECKS: Readonly<Record<string, () => Promise<BrokerChecks>>> = Object.freeze({
  nats: async () => (await import('./nats-checks.js')).natsFindings,
  rabbitmq: async () => (await import('./rabbitmq-checks.js')).rabbitFindings,
  kafka: async () => (await import('./kafka-checks.js')).kafkaFindings,
  'redis-streams': async () => (await import('./redis-streams-checks.js')).redisStreamsFindings,
  sqs: async () => (await import('./sqs-checks.js')).sqsFindings,
});

/**
 * The broker checks of `oncemq doctor` for `target.transport`: what the broker is set to that breaks
 * the promise or its cost, read and never written (docs/doctor.md, Broker checks). A stream, queue or topic
 * the consumers read that is not there is a `fail`; a broker that cannot be read is one `skip`.
 */
export async function brokerFindings(target: BrokerTarget, settings: DoctorSettings): Promise<Finding[]> {
  const load = CHECKS[target.transport];
  if (load !== undefined) {
    let checks: BrokerChecks;
    try {
      checks = await load();
    } catch (error) {
      return [
        {
          check: `${target.transport}.settings`,
          status: 'skip',
          summary: `the checks of ${target.transport} need its client package: ${errorText(error)}`,
        },
      ];
    }
    return checks(target, settings);
  }
  return [
    {
      check: `${target.transport}.settings`,
      status: 'skip',
      summary:
        target.transport === 'rocketmq'
          ? "RocketMQ's settings are not checked yet (the group's retry count against the policy is the one to look at by hand: mqadmin consumerStatus)"
          : `no broker checks for transport ${target.transport}`,
    },
  ];
}
