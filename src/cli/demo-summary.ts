import type { DemoResult } from './demo-result.js';

/** What the messages dead-lettered for a reason are, in the summary's words. */
const DEAD_LETTER_MESSAGES: Readonly<Record<string, string>> = {
  malformed: 'messages whose body cannot be decoded (the poison messages)',
  'missing-key': 'messages without a business key',
  'invalid-key': 'messages whose business key cannot be read exactly',
  conflict: 'keys reused with another payload',
  'permanent-error': 'messages the handler refused (PermanentError)',
  'retries-exhausted': 'messages that failed at every retry',
  'invalid-header': "messages whose oncemq-* header holds a value oncemq never writes (a foreign producer's)",
};

export const line = (label: string, value: string): string => `  ${label.padEnd(24)}${value}`;

export const pairs = (record: Record<string, number>): string =>
  Object.entries(record)
    .map(([name, count]) => `${name} ${count}`)
    .join(' · ') || 'none';

/**
 * The dead letters by reason, one line each: the letters of a reason, the messages behind them, and
 * the copies dead-lettered again (a copy the producer resent, or one a crash or rebalance replayed).
 */
export function deadLetterLines(
  result: Pick<DemoResult, 'deadLettered' | 'deadLetterReasons' | 'deadLetterMessages'>,
): string[] {
  const lines = [line('dead-lettered', String(result.deadLettered))];
  for (const [reason, letters] of Object.entries(result.deadLetterReasons)) {
    const messages = result.deadLetterMessages[reason] ?? letters;
    const what = DEAD_LETTER_MESSAGES[reason] ?? 'messages';
    const again = letters - messages;
    const copies =
      again > 0 ? ` + ${again} more ${again === 1 ? 'copy' : 'copies'} of them, resent or replayed` : '';
    lines.push(line(`  ${reason}`, `${letters} = ${messages} ${what}${copies}`));
  }
  return lines;
}

/** The store's lines of a summary: ledger rows against the events (not for --naive), the Redis cache. */
export function storeLines(result: Pick<DemoResult, 'ledgerRows' | 'events' | 'cache'>): string[] {
  const lines: string[] = [];
  if (result.ledgerRows !== null)
    lines.push(line('ledger rows', `${result.ledgerRows} (expected ${result.events})`));
  if (result.cache !== null) {
    const { hits, misses, writes } = result.cache;
    lines.push(line('redis cache', `hits ${hits} · misses ${misses} · writes ${writes}`));
  }
  return lines;
}

/** The summary lines after the effects: ledger rows, cache, faults, dropped connections, time. */
export function runLines(
  result: Pick<
    DemoResult,
    | 'ledgerRows'
    | 'events'
    | 'cache'
    | 'faults'
    | 'transport'
    | 'connectionDrops'
    | 'elapsedMs'
    | 'messagesPerSecond'
  >,
): string[] {
  const lines = storeLines(result);
  lines.push(
    line('faults injected', pairs(result.faults)),
    ...(result.transport === 'local' ? [] : [line('connections dropped', String(result.connectionDrops))]),
    line('elapsed', `${(result.elapsedMs / 1000).toFixed(1)} s (${result.messagesPerSecond} deliveries/s)`),
  );
  return lines;
}

/** A few of the doubled and lost keys, for a failed run. */
export function keyLines(result: Pick<DemoResult, 'doubleKeys' | 'lostKeys'>): string[] {
  const lines: string[] = [];
  if (result.doubleKeys.length > 0) lines.push(`  doubled, e.g. ${result.doubleKeys.slice(0, 5).join(', ')}`);
  if (result.lostKeys.length > 0) lines.push(`  lost, e.g. ${result.lostKeys.slice(0, 5).join(', ')}`);
  return lines;
}

/** The demo's summary table, as printed without `--json`. */
export function demoSummary(result: DemoResult): string {
  const mode = result.naive ? 'naive consumer (no oncemq)' : 'oncemq';
  const lines = [
    `oncemq demo — payment-succeeded → +100 points · ${mode} · ${result.consumers} consumers · store ${result.store} · transport ${result.transport} · seed ${result.seed}`,
    line('events published', `${result.events}${result.poison > 0 ? ` (+ ${result.poison} poison)` : ''}`),
    line('users', String(result.users)),
    line('deliveries', String(result.deliveries)),
    line('effects applied', String(result.effects)),
    line('duplicates absorbed', pairs(result.duplicates)),
    ...deadLetterLines(result),
    line('double effects', String(result.doubleEffects)),
    line('lost effects', String(result.lostEffects)),
    line('users with wrong points', String(result.usersWithWrongPoints)),
  ];
  lines.push(...runLines(result));
  if (result.ok) {
    lines.push('OK: every event took effect exactly once; every poison message is in the dead-letter queue');
  } else {
    lines.push('FAILED: the effects do not match the events', ...keyLines(result));
  }
  return lines.join('\n');
}
