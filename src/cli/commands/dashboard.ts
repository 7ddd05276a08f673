import { validateGroup } from '../../core/group.js';
import { UsageError, parseOptions, type Command } from '../command.js';
import { openDashboardSources } from '../dashboard/cli-sources.js';
import { startDashboard, type Dashboard } from '../dashboard/dashboard-server.js';
import { STORE_ARGS, storeTarget, storeUsage } from '../stores.js';
import { TRANSPORT_NAMES } from '../transports.js';

const usage = `Usage: oncemq dashboard [--store S] [--url URL] [--transport T --broker-url URL --group G…] [--metrics URL] [--port N]

A small web page on 127.0.0.1 over the same stores as 'oncemq ledger' and 'oncemq dlq': outcome
counters and rates with duplicates by source, stuck claims (inspect, reset), failed claims, and the
dead-letter queue (inspect, replay, discard). It prints a URL with a random access token; every
request needs the token. It never creates or migrates a table, file, queue or stream: what is not
there is shown as an error on the page until it is.

${storeUsage()}
  --transport T      the dead-letter queue's transport: ${TRANSPORT_NAMES.join(', ')}
  --broker-url URL   its broker; for local, its SQLite file
  --group G          a consumer group whose dead letters are shown (repeat for more); also
                     limits the counters of --metrics to these groups
  --metrics URL      the consumer's Prometheus endpoint (servePrometheus), for the outcome counters
  --port N           port on 127.0.0.1 (default 0: a free one, printed)

Runs until Ctrl-C (SIGINT) or SIGTERM.`;

/** A port option: 0 (a free one, the default) to 65535. */
export function portOption(value: string | undefined, name = 'port'): number {
  if (value === undefined) return 0;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`--${name} must be a whole number from 0 to 65535, got '${value}'`);
  }
  return port;
}

/**
 * Resolves once the process is asked to stop (Ctrl-C, SIGTERM), or when `cancel` aborts; either way
 * its listeners are gone after, and the signals act as usual again.
 */
export function untilSignal(cancel?: AbortSignal): Promise<string> {
  return new Promise((resolve) => {
    const stop = (signal: string): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      cancel?.removeEventListener('abort', aborted);
      resolve(signal);
    };
    const aborted = (): void => {
      stop('cancelled');
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    cancel?.addEventListener('abort', aborted);
  });
}

export const dashboardCommand: Command = {
  name: 'dashboard',
  summary: 'web page on loopback: outcomes, stuck and failed claims, dead letters (token-protected)',
  usage,
  async run(args) {
    const { values } = parseOptions(args, {
      ...STORE_ARGS,
      transport: { type: 'string' },
      'broker-url': { type: 'string' },
      group: { type: 'string', multiple: true },
      metrics: { type: 'string' },
      port: { type: 'string' },
    });
    const port = portOption(values.port);
    const groups = (values.group ?? []).map((group) => {
      try {
        return validateGroup(group, '--group');
      } catch (error) {
        throw new UsageError((error as Error).message);
      }
    });
    const transport = values.transport;
    if (transport !== undefined && !TRANSPORT_NAMES.includes(transport)) {
      throw new UsageError(`unknown transport '${transport}'; use one of ${TRANSPORT_NAMES.join(', ')}`);
    }
    if (transport !== undefined && groups.length === 0) {
      throw new UsageError('--transport needs --group: the groups whose dead letters are shown');
    }
    if (transport === undefined && values['broker-url'] !== undefined) {
      throw new UsageError('--broker-url needs --transport');
    }
    const wantsStore = values.store !== undefined || values.url !== undefined;
    if (!wantsStore && transport === undefined && values.metrics === undefined) {
      throw new UsageError('nothing to show: give --store, --transport or --metrics');
    }
    const opened = await openDashboardSources({
      groups,
      ...(wantsStore ? { store: { name: values.store, target: storeTarget(values, false) } } : {}),
      ...(transport === undefined ? {} : { transport: { name: transport, url: values['broker-url'] } }),
      ...(values.metrics === undefined ? {} : { metrics: values.metrics }),
    });
    let dashboard: Dashboard | undefined;
    try {
      dashboard = await startDashboard(opened.sources, { port });
      console.log(`oncemq dashboard on ${dashboard.url}`);
      console.log(`open: ${dashboard.openUrl}`);
      console.log('every request needs this token; Ctrl-C stops the dashboard');
      await untilSignal();
      return 0;
    } finally {
      await dashboard?.close();
      await opened.close();
    }
  },
};
