import { brokersCommand, brokerStatus } from './brokers.js';

/**
 * Vitest global setup: the first test file that needs Kafka or RocketMQ starts it (test/support/brokers.ts),
 * once for every file of the run; after the run, this stops the brokers the run started and leaves those
 * that ran before it (started by `.ci/run` or by hand) as they were.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const runningBefore = new Set((await brokerStatus()).filter((broker) => broker.running).map((b) => b.name));
  return async () => {
    const startedByRun = (await brokerStatus())
      .filter((broker) => broker.running && !runningBefore.has(broker.name))
      .map((broker) => broker.name);
    if (startedByRun.length > 0) await brokersCommand(['stop', ...startedByRun]);
  };
}
