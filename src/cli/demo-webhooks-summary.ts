import type { WebhooksResult } from './demo-webhooks-run.js';
import { keyLines, line, pairs, storeLines } from './demo-summary.js';

/** The summary table of `oncemq demo --scenario webhooks`, as printed without `--json`. */
export function webhooksSummary(result: WebhooksResult): string {
  const mode = result.naive ? 'naive receivers (no oncemq)' : 'receivers behind oncemq/http';
  const { faults, sender } = result;
  const count = (name: keyof WebhooksResult['faults']): number => faults[name] ?? 0;
  const replays = Object.values(result.duplicates).reduce((sum, n) => sum + n, 0);
  const lines = [
    `oncemq demo — webhooks: payment.succeeded → +100 points · ${mode} · ${result.receivers} receivers · store ${result.store} · seed ${result.seed}`,
    line('events sent', String(result.events)),
    line('users', String(result.users)),
    line('requests sent', String(sender.requests)),
    line(
      '  retried',
      `timeout ${sender.timeouts} · 5xx ${sender.serverErrors} · 409 ${sender.inFlight} · connection ${sender.connectionErrors}`,
    ),
    line('  resent after a 2xx', String(sender.resent)),
    line('  given up', String(sender.gaveUp)),
    line('deliveries received', String(result.deliveries)),
    line('effects applied', String(result.effects)),
    ...(result.naive
      ? []
      : [line('replays answered', `${replays} (the stored 2xx sent again, the handler not run)`)]),
    line('double effects', String(result.doubleEffects)),
    line('lost effects', String(result.lostEffects)),
    line('users with wrong points', String(result.usersWithWrongPoints)),
  ];
  lines.push(
    ...storeLines(result),
    line('faults injected', pairs(faults)),
    line(
      '  receiver killed',
      `${count('crash-after-commit')} after a commit, before its 2xx (crash-after-commit); restarted ${result.receiverRestarts}`,
    ),
    line(
      '  response dropped',
      `${count('consumer-ack-loss')} after a commit (consumer-ack-loss): the sender timed out`,
    ),
    line('  handler crashed', `${count('handler-crash')} after its write (handler-crash): 500`),
    line('  commit failed', `${count('commit-failure')} after the handler (commit-failure): 503`),
    line('  sender resent', `${count('producer-ack-loss')} after a 2xx (producer-ack-loss)`),
    line('elapsed', `${(result.elapsedMs / 1000).toFixed(1)} s (${result.deliveriesPerSecond} deliveries/s)`),
  );
  if (result.ok) {
    lines.push('OK: every webhook event took effect exactly once');
  } else {
    lines.push('FAILED: the effects do not match the events sent', ...keyLines(result));
  }
  return lines.join('\n');
}
