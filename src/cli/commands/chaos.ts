import { nonNegativeOption, parseOptions, positiveOption, UsageError, type Command } from '../command.js';
import { CHAOS_STORES, runChaos, type ChaosResult } from '../chaos-run.js';
import { defaultClusterFile } from '../cluster-nodes.js';
import { progressReporter } from '../progress.js';
import { RUN_TRANSPORT_NAMES } from '../run-transports.js';

const usage = `Usage: oncemq chaos --transport T --store S [options]

Several consumer processes on one group apply payment-succeeded events (+100 points) while the
harness publishes them (resending some with the same key, as after a lost confirm), kills random
consumers with SIGKILL and starts them again, cuts their broker connections through a TCP proxy and
kills their database connections. Then it waits until every event is settled (executed, absorbed as
a duplicate, or dead-lettered) and checks each effect in the database: one grant row per event,
the right balance per user, one ledger row per event. Exits 0 only when nothing is doubled or lost;
1 when something is; 2 for a wrong option.

  --transport NAME ${RUN_TRANSPORT_NAMES.join(', ')} (required). local: the processes share one SQLite
                   broker file (it has no connection to cut: connectionDrops stays 0)
  --store NAME     ${CHAOS_STORES.join(', ')} (required). sqlite: one file the processes share (no
                   server connection to kill: poolRestarts stays 0); postgres and mysql: a schema /
                   database made for the run and dropped after it
  --events N       payment events to publish (default 1000)
  --consumers K    consumer processes (default 3)
  --seed S         seed of the resends, the poison messages and the members killed (default 1)
  --resend-rate R  chance that the producer sends an event again with the same key, as after a lost
                   publish confirm (default 0.02)
  --kill-every MS  a random consumer killed every MS while events flow (default 4000; 0: only the
                   rounds below)
  --drop-every MS  broker connections cut every MS (default 2000)
  --pool-every MS  the run's database connections killed every MS (default 3000)
  --rounds N       between N+1 slices of the publishing, one kill, one cut and one database kill
                   each, whatever the timing (default 2)
  --url URL        the database of --store postgres|mysql (default ONCEMQ_POSTGRES_URL /
                   ONCEMQ_MYSQL_URL, else the loopback server)
  --broker-url URL the broker of --transport (default ONCEMQ_RABBITMQ_URL / ONCEMQ_NATS_URL /
                   ONCEMQ_REDIS_URL / ONCEMQ_SQS_ENDPOINT, else the loopback server)
  --cluster        on the three-node cluster \`npm run brokers -- start --cluster T\` started (nats,
                   rabbitmq, kafka): the consumers spread over its nodes, streams / queues /
                   topics get 3 replicas, and while events flow the leader of the run's stream,
                   quorum queue or partition is killed with SIGKILL and started again, or paused
                   with SIGSTOP past the cluster's timeouts and resumed, in turn
  --cluster-file F its description (default: the one npm run brokers wrote)
  --node-every MS  a node failure every MS (default 20000)
  --node-down MS   a killed node stays down this long (default 5000)
  --node-pause MS  a paused node stays paused this long (default 15000)
  --hosts N        the consumers on N test hosts of this machine (network namespaces joined by veth
                   links; needs Linux, root and iproute2; --store postgres or mysql): each host
                   reaches the broker and the database over its link only, and while events flow
                   one host at a time is cut off (its link down: connections hang, nothing resets)
                   for longer than the broker's ack wait, then brought back
  --cut-every MS   a host cut off every MS (default 15000)
  --cut-for MS     a cut host stays off this long (default 40000)
  --mode M         transactional (default: the claim and the effect in one transaction) or leased
                   (--store postgres or mysql): each consumer claims with an owner-checked lease
                   renewed while its handler runs, applies the effect outside the ledger's
                   transaction (an audited row of its own), then completes. The run checks that
                   every event was applied and completed once, by the owner of its last claim (a
                   completion by an owner whose key was taken over must be refused), and reports
                   takeovers, stale completions refused and events applied more than once
  --lease MS       the lease of --mode leased (default 4000; renewed every third of it)
  --timeout MS     longest wait for every event to settle (default max(120000, 10 per event))
  --json           one JSON object on stdout (events, kills, connectionDrops, poolRestarts,
                   doubleEffects, lostEffects, deadLettered, durationMs, ok, …; leased: takeovers,
                   staleCompletesRefused, staleCompletesAccepted, applications, applicationsDoubled)

Queues, streams or keys on the broker live under a name made for the run and are deleted after it.`;

function summary(result: ChaosResult): string {
  const line = (label: string, value: string | number): string => `  ${label.padEnd(22)}${value}`;
  const lines = [
    `oncemq chaos — ${result.consumers} consumer processes · transport ${result.transport} · store ${result.store} · seed ${result.seed}`,
    line(
      'events published',
      `${result.events} (+ ${result.poison} poison, ${result.producerResends} resent)`,
    ),
    line('consumers killed', result.kills),
    line('connections dropped', result.connectionDrops),
    line('pool restarts', result.poolRestarts),
    ...(result.hosts === undefined
      ? []
      : [line('hosts / cut off', `${result.hosts} / ${result.hostCuts ?? 0}`)]),
    ...(result.nodeFaults === undefined
      ? []
      : [line('nodes killed / paused', `${result.nodeKills ?? 0} / ${result.nodePauses ?? 0}`)]),
    ...(result.mode === 'leased'
      ? [
          line('lease', `${result.leaseMs ?? 0} ms`),
          line('takeovers', result.takeovers ?? 0),
          line(
            'stale completes',
            `${result.staleCompletesRefused ?? 0} refused, ${result.staleCompletesAccepted ?? 0} accepted`,
          ),
          line('applied twice or more', result.applicationsDoubled ?? 0),
        ]
      : []),
    line('effects', result.effects),
    line('dead-lettered', result.deadLettered),
    line('double effects', result.doubleEffects),
    line('lost effects', result.lostEffects),
    line('users wrong points', result.usersWithWrongPoints),
    line('ledger rows', `${result.ledgerRows} (expected ${result.events})`),
    line('duration', `${(result.durationMs / 1000).toFixed(1)} s (${result.eventsPerSecond} events/s)`),
  ];
  if (result.ok && result.mode === 'leased')
    lines.push(
      'OK: every event applied and completed once, by the owner of its last claim; no stale completion accepted',
    );
  else if (result.ok)
    lines.push('OK: every event took effect exactly once under kills, drops and pool restarts');
  else {
    lines.push(`FAILED${result.settled ? '' : ' (not settled before the timeout)'}`);
    if (result.doubleKeys.length > 0)
      lines.push(`  doubled, e.g. ${result.doubleKeys.slice(0, 5).join(', ')}`);
    if (result.lostKeys.length > 0) lines.push(`  lost, e.g. ${result.lostKeys.slice(0, 5).join(', ')}`);
    if ((result.staleKeys ?? []).length > 0)
      lines.push(`  completed by a stale owner, e.g. ${(result.staleKeys ?? []).slice(0, 5).join(', ')}`);
    for (const error of result.memberErrors) lines.push(`  consumer: ${error}`);
  }
  return lines.join('\n');
}

/** A chance between 0 and 1. */
function rateOption(text: string): number {
  const rate = Number(text);
  if (text.trim() === '' || !Number.isFinite(rate) || rate < 0 || rate > 1) {
    throw new UsageError(`--resend-rate must be a number from 0 to 1, got '${text}'`);
  }
  return rate;
}

export const chaosCommand: Command = {
  name: 'chaos',
  summary: 'consumer processes killed, connections cut, pools restarted; effects checked',
  usage,
  async run(args) {
    const { values } = parseOptions(args, {
      transport: { type: 'string' },
      store: { type: 'string' },
      events: { type: 'string' },
      consumers: { type: 'string' },
      seed: { type: 'string', default: '1' },
      'resend-rate': { type: 'string' },
      'kill-every': { type: 'string' },
      'drop-every': { type: 'string' },
      'pool-every': { type: 'string' },
      rounds: { type: 'string' },
      url: { type: 'string' },
      'broker-url': { type: 'string' },
      timeout: { type: 'string' },
      cluster: { type: 'boolean', default: false },
      'cluster-file': { type: 'string' },
      'node-every': { type: 'string' },
      'node-down': { type: 'string' },
      'node-pause': { type: 'string' },
      hosts: { type: 'string' },
      'cut-every': { type: 'string' },
      'cut-for': { type: 'string' },
      mode: { type: 'string', default: 'transactional' },
      lease: { type: 'string' },
      json: { type: 'boolean', default: false },
    });
    const transport = values.transport;
    if (transport === undefined || !RUN_TRANSPORT_NAMES.includes(transport)) {
      throw new UsageError(`--transport must be one of ${RUN_TRANSPORT_NAMES.join(', ')}`);
    }
    const store = values.store;
    if (store === undefined || !(CHAOS_STORES as readonly string[]).includes(store)) {
      throw new UsageError(`--store must be one of ${CHAOS_STORES.join(', ')}`);
    }
    if (values.hosts !== undefined && values.cluster) {
      throw new UsageError('--hosts and --cluster do not go together: the hosts reach one broker server');
    }
    if (values.mode !== 'transactional' && values.mode !== 'leased') {
      throw new UsageError(`--mode must be transactional or leased, got '${values.mode}'`);
    }
    if (values.mode === 'leased' && store !== 'postgres' && store !== 'mysql') {
      throw new UsageError(
        '--mode leased needs --store postgres or mysql: the run audits through the database',
      );
    }
    if (values.lease !== undefined && values.mode !== 'leased')
      throw new UsageError('--lease goes with --mode leased');
    const progress = progressReporter('settled');
    const timeout = values.timeout === undefined ? undefined : positiveOption(values.timeout, 'timeout', 1);
    const result = await runChaos({
      transport,
      store,
      events: positiveOption(values.events, 'events', 1000),
      consumers: positiveOption(values.consumers, 'consumers', 3),
      seed: values.seed,
      ...(values['resend-rate'] === undefined ? {} : { resendRate: rateOption(values['resend-rate']) }),
      killEveryMs: nonNegativeOption(values['kill-every'], 'kill-every', 4000),
      dropEveryMs: nonNegativeOption(values['drop-every'], 'drop-every', 2000),
      poolEveryMs: nonNegativeOption(values['pool-every'], 'pool-every', 3000),
      rounds: nonNegativeOption(values.rounds, 'rounds', 2),
      ...(values.url === undefined ? {} : { storeUrl: values.url }),
      ...(values['broker-url'] === undefined ? {} : { brokerUrl: values['broker-url'] }),
      ...(timeout === undefined ? {} : { timeoutMs: timeout }),
      ...(values.cluster
        ? {
            cluster: {
              file: values['cluster-file'] ?? defaultClusterFile(transport),
              everyMs: positiveOption(values['node-every'], 'node-every', 20_000),
              downMs: nonNegativeOption(values['node-down'], 'node-down', 5000),
              pauseMs: nonNegativeOption(values['node-pause'], 'node-pause', 15_000),
            },
          }
        : {}),
      ...(values.hosts === undefined
        ? {}
        : {
            hosts: {
              count: positiveOption(values.hosts, 'hosts', 2),
              cutEveryMs: positiveOption(values['cut-every'], 'cut-every', 15_000),
              cutForMs: positiveOption(values['cut-for'], 'cut-for', 40_000),
            },
          }),
      ...(values.mode === 'leased'
        ? { leased: { leaseMs: positiveOption(values.lease, 'lease', 4000) } }
        : {}),
      onProgress: (done, total) => {
        progress.update(done, total);
      },
    });
    progress.end();
    console.log(values.json ? JSON.stringify(result) : summary(result));
    return result.ok ? 0 : 1;
  },
};
