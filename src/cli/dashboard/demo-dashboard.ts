import type { DemoLive, DemoResult } from '../demo-result.js';
import { startDashboard, type Dashboard } from './dashboard-server.js';

/** Input of {@link demoDashboard}. */
export interface DemoDashboardOptions {
  /** Port on 127.0.0.1 (0: a free one). */
  readonly port: number;
  /**
   * How long the run waits, once the URL is printed, for a page to open the dashboard before it
   * publishes its first event (0: it does not wait).
   */
  readonly waitMs: number;
  /** How long the dashboard stays open after the run, unless `stop` resolves first. */
  readonly holdMs: number;
  /** Resolves when the user asks to stop (Ctrl-C), or when `cancel` aborts (the hold ended). */
  readonly untilStop: (cancel: AbortSignal) => Promise<unknown>;
  /** Where the URL and the hold notice go (stderr: stdout is the summary's). */
  readonly say: (line: string) => void;
  /** Prints the run's summary once the effects are checked, before the hold. */
  readonly summary: (result: DemoResult) => void;
}

/**
 * `oncemq demo --dashboard`: the dashboard over the running demo's own ledger, dead-letter queue and
 * pipeline counters, opened before the first event is published (the run waits up to `waitMs` for a
 * page to show it, so the whole run can be watched) and kept open after the run (one
 * consumer still subscribed, so a replay from the page is delivered again) for `holdMs` or until
 * Ctrl-C. It closes nothing of the demo's: the run closes its broker and store after the hold.
 */
export function demoDashboard(options: DemoDashboardOptions): DemoLive & { close(): Promise<void> } {
  let dashboard: Dashboard | undefined;
  return {
    async started(view) {
      const fixed = <T>(location: string, value: T) => ({
        location,
        open: () => Promise.resolve(value),
        close: () => Promise.resolve(),
      });
      const metrics = view.metrics();
      dashboard = await startDashboard(
        {
          groups: [view.group],
          ledger: fixed(`${view.ledger.name} (the demo's)`, view.ledger),
          deadLetters: { transport: view.transport, ...fixed("(the demo's)", view.deadLetters) },
          ...(metrics === undefined
            ? {}
            : {
                metrics: {
                  kind: 'process' as const,
                  location: `(the demo's pipeline, group ${view.group})`,
                  read: () => Promise.resolve(view.metrics() ?? metrics),
                },
              }),
        },
        { port: options.port },
      );
      if (options.waitMs <= 0) {
        options.say(`oncemq dashboard: ${dashboard.openUrl}`);
        return;
      }
      const seconds = Math.round(options.waitMs / 1000);
      options.say(
        `oncemq dashboard: ${dashboard.openUrl} (the run starts when the page is open, or in ${seconds} s)`,
      );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        dashboard.opened,
        new Promise((resolve) => {
          timer = setTimeout(resolve, options.waitMs);
        }),
      ]);
      clearTimeout(timer);
    },
    async finished(result) {
      options.summary(result);
      const seconds = Math.round(options.holdMs / 1000);
      options.say(
        `oncemq dashboard: open for ${seconds} s more (Ctrl-C stops it): ${dashboard?.openUrl ?? ''}`,
      );
      const cancel = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        options.untilStop(cancel.signal),
        new Promise((resolve) => {
          timer = setTimeout(resolve, options.holdMs);
        }),
      ]);
      clearTimeout(timer);
      cancel.abort();
    },
    async close() {
      await dashboard?.close();
      dashboard = undefined;
    },
  };
}
