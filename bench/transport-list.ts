/** The brokers the transport and ordered suites know, one entry each (bench/transports/<name>.ts). */
import { reachable, type TransportTarget } from './transport-target.js';

export const TARGETS: Readonly<Record<string, () => Promise<TransportTarget>>> = {
  rabbitmq: async () => (await import('./transports/rabbitmq.js')).target,
  nats: async () => (await import('./transports/nats.js')).target,
  'redis-streams': async () => (await import('./transports/redis-streams.js')).target,
  local: async () => (await import('./transports/local.js')).target,
  kafka: async () => (await import('./transports/kafka.js')).target,
  rocketmq: async () => (await import('./transports/rocketmq.js')).target,
};

/**
 * The targets named (all known ones when `explicit` is false): one that nothing listens for is
 * skipped with a line on stderr, or, when it was named explicitly, an error.
 */
export async function reachableTargets(
  names: readonly string[],
  explicit: boolean,
  suite: string,
): Promise<TransportTarget[]> {
  const targets: TransportTarget[] = [];
  for (const name of names) {
    const load = TARGETS[name];
    if (load === undefined) throw new Error(`${suite}: unknown transport '${name}'`);
    const target = await load();
    if (target.url !== undefined && !(await reachable(target.url()))) {
      const why = `${name}: nothing listens at ${target.url()}`;
      if (explicit) throw new Error(`${suite}: ${why}`);
      console.error(`${suite}: skipping ${why}`);
      continue;
    }
    targets.push(target);
  }
  return targets;
}
