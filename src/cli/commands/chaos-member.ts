import { parseOptions, positiveOption, UsageError, type Command } from '../command.js';
import { runChaosMember } from '../chaos-member.js';

const REQUIRED = ['transport', 'broker-url', 'store', 'namespace', 'dir', 'name'] as const;

/** The member process `oncemq chaos` starts, kills and restarts; not for direct use. */
export const chaosMemberCommand: Command = {
  name: 'chaos-member',
  hidden: true,
  summary: 'one consumer process of `oncemq chaos` (started by it)',
  usage: `Usage: oncemq chaos-member --transport T --broker-url URL --store S --namespace NS --dir DIR --name NAME
  [--store-url URL] [--concurrency N] [--replicas N] [--lease MS]

One consumer process of a chaos run; \`oncemq chaos\` starts it. Prints {"ready":true} once subscribed,
drains and exits 0 on SIGTERM. With --lease, the pipeline runs in leased mode with that lease.`,
  async run(args) {
    const { values } = parseOptions(args, {
      transport: { type: 'string' },
      'broker-url': { type: 'string' },
      store: { type: 'string' },
      'store-url': { type: 'string' },
      namespace: { type: 'string' },
      dir: { type: 'string' },
      name: { type: 'string' },
      concurrency: { type: 'string' },
      replicas: { type: 'string' },
      lease: { type: 'string' },
    });
    for (const option of REQUIRED) {
      if (values[option] === undefined) throw new UsageError(`--${option} is required`);
    }
    await runChaosMember({
      transport: values.transport ?? '',
      brokerUrl: values['broker-url'] ?? '',
      store: values.store ?? '',
      ...(values['store-url'] === undefined ? {} : { storeUrl: values['store-url'] }),
      namespace: values.namespace ?? '',
      dir: values.dir ?? '',
      name: values.name ?? '',
      concurrency: positiveOption(values.concurrency, 'concurrency', 16),
      replicas: positiveOption(values.replicas, 'replicas', 1),
      ...(values.lease === undefined
        ? {}
        : { leased: { leaseMs: positiveOption(values.lease, 'lease', 1) } }),
    });
    return 0;
  },
};
