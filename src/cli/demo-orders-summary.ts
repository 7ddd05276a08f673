import type { OrdersResult } from './demo-orders-run.js';
import { deadLetterLines, keyLines, line, pairs, runLines } from './demo-summary.js';

/** The summary table of `oncemq demo --scenario orders`, as printed without `--json`. */
export function ordersSummary(result: OrdersResult): string {
  const lines = [
    `oncemq demo — orders: create → pay → ship through the outbox · ${result.consumers} consumers · store ${result.store} · transport ${result.transport} · seed ${result.seed}`,
    line('orders', String(result.orders)),
    line('events written', `${result.events}${result.poison > 0 ? ` (+ ${result.poison} poison)` : ''}`),
    line('outbox rows published', String(result.outboxPublished)),
    line('relay crashes', `${result.relayCrashes} (relay restarted each time)`),
    line('relay duplicates', `${result.relayDuplicates} copies published again`),
    line('deliveries', String(result.deliveries)),
    line('effects applied', String(result.effects)),
    line('duplicates absorbed', pairs(result.duplicates)),
    ...deadLetterLines(result),
    line('out of order', String(result.outOfOrder)),
    line('double effects', String(result.doubleEffects)),
    line('lost effects', String(result.lostEffects)),
    line('orders not shipped', String(result.ordersNotShipped)),
  ];
  lines.push(...runLines(result));
  if (result.ok) {
    lines.push('OK: every event took effect exactly once and in order; every order is shipped');
  } else {
    lines.push('FAILED: the effects do not match the events written');
    if (result.outOfOrder > 0) lines.push(`  ${result.outOfOrder} events applied out of order`);
    lines.push(...keyLines(result));
  }
  return lines.join('\n');
}
