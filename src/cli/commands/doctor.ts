import { parseDuration } from '../../core/duration.js';
import { validateGroup } from '../../core/group.js';
import { DEFAULT_REPLAY_MARGIN } from '../../core/retry-policy.js';
import { parseOptions, UsageError, type Command } from '../command.js';
import { resolveServiceUrl } from '../connection.js';
import { brokerFindings } from '../doctor/brokers.js';
import { doctorExitCode, type DoctorSettings, type Finding, type FindingStatus } from '../doctor/findings.js';
import { ledgerFindings, type LedgerDoctorOptions, type LedgerInspector } from '../doctor/ledger-doctor.js';
import { openMysqlInspector } from '../doctor/mysql-doctor.js';
import { openPostgresInspector } from '../doctor/postgres-doctor.js';
import { openRedisInspector } from '../doctor/redis-doctor.js';
import { parseRetryOption, RETRY_SPELLINGS } from '../doctor/retry-option.js';
import { openSqliteInspector } from '../doctor/sqlite-doctor.js';
import { STORE_ARGS, storeOfUrl, storeUsage } from '../stores.js';

/** The ledgers doctor reads: the stores of `oncemq ledger`, and Redis. */
const DOCTOR_STORES = ['sqlite', 'mysql', 'postgres', 'redis'] as const;

const usage = `Usage: oncemq doctor [--store S --url URL …] [--transport T --broker-url URL …] [options]

Reads the deployment (never writes, never creates or migrates) and reports what breaks the
exactly-once promise or its cost, one line per check with its fix. Exit 1 when a check fails,
0 when none does (warnings alone exit 0), 2 on wrong options. See docs/doctor.md.

The ledger (checked when --store or --url is given):
  --store S        ${DOCTOR_STORES.join(', ')} (default: from the --url scheme)
${storeUsage()
  .split('\n')
  .filter((line) => !line.trimStart().startsWith('--store'))
  .join('\n')}
  --prefix P       key prefix of the Redis ledger (default oncemq; its --url defaults to
                   ONCEMQ_REDIS_URL, else the loopback Redis)

The broker (checked when --transport is given):
  --transport T    the consumers' transport (rabbitmq, kafka, nats, rocketmq, sqs, redis-streams)
  --broker-url URL the broker's URL
  --topic NAME     the topic, stream or queue the consumers read
  --admin-url URL  the broker's management endpoint, where it has one
  --broker-prefix P the transport's name prefix when it is not the default (NATS streamPrefix,
                   RabbitMQ and Kafka prefix, Redis Streams prefix, SQS namespace)

The deployment's settings:
  --retry R        the consumers' retry policy (default rocketmq):
                   ${RETRY_SPELLINGS}
  --retention D    the ledger retention the app runs with (default: the ledger's, 7d)
  --replay-margin D  added to the retry horizon for dead-letter replays (default ${DEFAULT_REPLAY_MARGIN})
  --lease D        the lease of a leased pipeline (clock checks are relative to it)
  --handler-timeout D  the handler's longest expected run
  --group G        the consumer group
  --json           one JSON object: findings, summary counts and the exit code`;

const DOCTOR_ARGS = {
  ...STORE_ARGS,
  prefix: { type: 'string' },
  transport: { type: 'string' },
  'broker-url': { type: 'string' },
  topic: { type: 'string' },
  'admin-url': { type: 'string' },
  'broker-prefix': { type: 'string' },
  retry: { type: 'string' },
  retention: { type: 'string' },
  'replay-margin': { type: 'string' },
  lease: { type: 'string' },
  'handler-timeout': { type: 'string' },
  group: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

type DoctorValues = ReturnType<typeof parseOptions<typeof DOCTOR_ARGS>>['values'];

function duration(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  try {
    return parseDuration(value, `--${option}`);
  } catch (error) {
    throw new UsageError(`--${option} takes a duration such as 30s, 4h46m or 7d, got '${value}'`, {
      cause: error,
    });
  }
}

/** The settings the options give. */
export function doctorSettings(values: DoctorValues): DoctorSettings {
  return {
    retry: parseRetryOption(values.retry),
    replayMarginMs:
      duration(values['replay-margin'], 'replay-margin') ??
      parseDuration(DEFAULT_REPLAY_MARGIN, 'replay margin'),
    retentionMs: duration(values.retention, 'retention'),
    leaseMs: duration(values.lease, 'lease'),
    handlerTimeoutMs: duration(values['handler-timeout'], 'handler-timeout'),
    group: values.group === undefined ? undefined : validateGroup(values.group, '--group'),
  };
}

/** The ledger the options name, as a function that opens its inspector; undefined without --store and --url. */
function ledgerOpener(
  values: DoctorValues,
): { store: string; open: () => Promise<LedgerInspector> } | undefined {
  if (values.store === undefined && values.url === undefined) return undefined;
  const store = values.store ?? (/^rediss?:/i.test(values.url ?? '') ? 'redis' : storeOfUrl(values.url));
  if (store === undefined) throw new UsageError(`--store is required (one of ${DOCTOR_STORES.join(', ')})`);
  if (!(DOCTOR_STORES as readonly string[]).includes(store)) {
    throw new UsageError(`unknown store '${store}'; use one of ${DOCTOR_STORES.join(', ')}`);
  }
  const only: Record<string, string> = { schema: 'postgres', database: 'mysql', prefix: 'redis' };
  for (const [option, owner] of Object.entries(only)) {
    if (values[option as 'schema'] !== undefined && store !== owner) {
      throw new UsageError(`--${option} is for --store ${owner}, not ${store}`);
    }
  }
  if (store === 'redis' && values.table !== undefined)
    throw new UsageError('--table is not for --store redis');
  const { table, schema, database, prefix } = values;
  switch (store) {
    case 'sqlite': {
      const path = values.url?.replace(/^sqlite:(\/\/)?/, '');
      if (path === undefined || path === '')
        throw new UsageError('--store sqlite needs --url PATH, the ledger database file');
      return { store, open: () => openSqliteInspector({ path, table }) };
    }
    case 'mysql':
      return {
        store,
        open: () => openMysqlInspector({ url: resolveServiceUrl('mysql', values.url).url, table, database }),
      };
    case 'postgres':
      return {
        store,
        open: () =>
          openPostgresInspector({ url: resolveServiceUrl('postgres', values.url).url, table, schema }),
      };
    default:
      return {
        store,
        open: () => openRedisInspector({ url: resolveServiceUrl('redis', values.url).url, prefix }),
      };
  }
}

/** Every finding of the checks the options ask for. */
export async function runDoctor(
  args: readonly string[],
  options: LedgerDoctorOptions = {},
): Promise<{ readonly findings: Finding[]; readonly json: boolean }> {
  const { values, positionals } = parseOptions(args, DOCTOR_ARGS, true);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const settings = doctorSettings(values);
  const ledger = ledgerOpener(values);
  const brokerOnly = ['broker-url', 'topic', 'admin-url', 'broker-prefix'] as const;
  if (values.transport === undefined) {
    const stray = brokerOnly.find((option) => values[option] !== undefined);
    if (stray !== undefined) throw new UsageError(`--${stray} needs --transport`);
  }
  if (ledger === undefined && values.transport === undefined) {
    throw new UsageError('name what to check: a ledger (--store/--url), a broker (--transport), or both');
  }
  const findings: Finding[] = [];
  if (ledger !== undefined)
    findings.push(...(await ledgerFindings(ledger.open, ledger.store, settings, options)));
  if (values.transport !== undefined) {
    const target = {
      transport: values.transport,
      url: values['broker-url'],
      topic: values.topic,
      adminUrl: values['admin-url'],
      prefix: values['broker-prefix'],
    };
    findings.push(...(await brokerFindings(target, settings)));
  }
  return { findings, json: values.json };
}

const MARKS: Readonly<Record<FindingStatus, string>> = {
  ok: '✔ ok  ',
  warn: '⚠ warn',
  fail: '✘ fail',
  skip: '- skip',
};

/** The counts of each status. */
export function doctorSummary(findings: readonly Finding[]): Record<FindingStatus, number> {
  const counts: Record<FindingStatus, number> = { ok: 0, warn: 0, fail: 0, skip: 0 };
  for (const finding of findings) counts[finding.status]++;
  return counts;
}

/** The report as `oncemq doctor` prints it: one line per finding, its fix indented under it. */
export function doctorReport(findings: readonly Finding[]): string {
  const lines = findings.flatMap((finding) => [
    `${MARKS[finding.status]}  ${finding.check}: ${finding.summary}`,
    ...(finding.fix === undefined || finding.status === 'ok' ? [] : [`          fix: ${finding.fix}`]),
  ]);
  const counts = doctorSummary(findings);
  lines.push(`${counts.ok} ok, ${counts.warn} warn, ${counts.fail} fail, ${counts.skip} skip`);
  return lines.join('\n');
}

export const doctorCommand: Command = {
  name: 'doctor',
  summary: 'read the deployment and report what breaks the promise or its cost',
  usage,
  async run(args) {
    const { findings, json } = await runDoctor(args);
    const code = doctorExitCode(findings);
    if (json) {
      console.log(JSON.stringify({ findings, summary: doctorSummary(findings), exitCode: code }));
    } else {
      console.log(doctorReport(findings));
    }
    return code;
  },
};
