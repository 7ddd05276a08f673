import { ConfigError } from '../../core/errors.js';
import { UsageError } from '../command.js';
import { openStore, redactedLocation, type StoreTarget } from '../stores.js';
import { openToolTransport } from '../transports.js';
import { lazyOpener, type DashboardSources } from './dashboard-sources.js';
import { prometheusSource } from './prometheus-totals.js';

/** What `oncemq dashboard` was pointed at. */
export interface DashboardTargets {
  /** The consumer groups whose dead letters are shown (and whose counters, with `metrics`). */
  readonly groups: readonly string[];
  /** `--store` and its table; opened read-only (`migrate: false` is the caller's). */
  readonly store?: { readonly name: string | undefined; readonly target: StoreTarget };
  /** `--transport` and `--broker-url`. */
  readonly transport?: { readonly name: string; readonly url: string | undefined };
  /** `--metrics`: the consumer's Prometheus scrape URL. */
  readonly metrics?: string;
}

/**
 * The dashboard's sources from the command line: the ledger through the CLI's store openers, the
 * dead-letter queue through its tool transports (which create nothing), the counters through a
 * Prometheus scrape. Nothing is reached yet: each is opened on the page's first read, and a failed
 * opening (a missing table, a broker that is down) is shown and tried again on the next.
 */
export async function openDashboardSources(
  targets: DashboardTargets,
): Promise<{ readonly sources: DashboardSources; close(): Promise<void> }> {
  let metrics;
  try {
    metrics = targets.metrics === undefined ? undefined : prometheusSource(targets.metrics, targets.groups);
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(`--${error.message}`);
    throw error;
  }
  const store =
    targets.store === undefined ? undefined : await openStore(targets.store.name, targets.store.target);
  const transport = targets.transport;
  const broker =
    transport === undefined
      ? undefined
      : lazyOpener(
          transport.url === undefined ? '(its default URL)' : redactedLocation(transport.url),
          () => openToolTransport(transport.name, { url: transport.url }),
          (opened) => opened.close(),
        );
  const sources: DashboardSources = {
    groups: targets.groups,
    ...(store === undefined
      ? {}
      : {
          ledger: {
            location: store.location,
            // init() only checks the table (migrate: false); a failed check runs again on the next call.
            open: async () => {
              await store.ledger.init();
              return store.ledger;
            },
            close: () => Promise.resolve(),
          },
        }),
    ...(transport === undefined || broker === undefined
      ? {}
      : {
          deadLetters: {
            transport: transport.name,
            location: broker.location,
            open: async () => (await broker.open()).deadLetters,
            close: () => broker.close(),
          },
        }),
    ...(metrics === undefined ? {} : { metrics }),
  };
  return {
    sources,
    async close() {
      await broker?.close();
      await store?.close();
    },
  };
}
