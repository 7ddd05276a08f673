import type { DeadLetter, DeadLetters } from '../transport/dead-letters.js';
import type { DemoStore } from './demo-store.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface SettleOptions {
  readonly store: Pick<DemoStore, 'grantedEvents'>;
  readonly deadLetters: DeadLetters;
  readonly group: string;
  /** Events that must each take effect. */
  readonly events: number;
  /** Keys that must each be dead-lettered (the poison messages). */
  readonly poisonKeys: readonly string[];
  /**
   * A counter that moves while consumers work (deliveries seen in this process); settled means it
   * stood still. @default the grant rows in the store
   */
  readonly activity?: () => number | Promise<number>;
  /** How long `activity` must stand still once everything is accounted for. @default 1000 */
  readonly quietMs?: number;
  readonly timeoutMs: number;
  readonly onProgress?: (done: number, total: number) => void;
}

export interface Settled {
  /** Everything accounted for and quiet before the timeout. */
  readonly complete: boolean;
  readonly deadLetters: readonly DeadLetter[];
}

/**
 * Waits until every event has its effect in the store and every poison key is in the dead-letter
 * queue, then until the consumers are quiet (late copies get their chance to show a double effect),
 * or until the timeout. A poll that fails (a database connection killed on purpose) is tried again.
 * What is missing at the timeout is for the effect checker to report.
 */
export async function settle(options: SettleOptions): Promise<Settled> {
  const deadline = Date.now() + options.timeoutMs;
  const quietMs = options.quietMs ?? 1000;
  const total = options.events + options.poisonKeys.length;
  const list = (): Promise<readonly DeadLetter[]> =>
    options.deadLetters.list({ group: options.group, limit: Number.MAX_SAFE_INTEGER });
  const activity = options.activity ?? (async () => (await options.store.grantedEvents()).rows);
  let accounted = false;
  let last = -1;
  let stillSince = Date.now();
  while (Date.now() < deadline) {
    await sleep(100);
    try {
      if (!accounted) {
        const granted = (await options.store.grantedEvents()).events;
        let dead = 0;
        if (granted >= options.events) {
          const keys = new Set((await list()).map((letter) => letter.key));
          dead = options.poisonKeys.filter((key) => keys.has(key)).length;
        }
        options.onProgress?.(Math.min(total, granted + dead), total);
        accounted = granted >= options.events && dead === options.poisonKeys.length;
        continue;
      }
      const now = await activity();
      if (now !== last) {
        last = now;
        stillSince = Date.now();
      } else if (Date.now() - stillSince >= quietMs) {
        return { complete: true, deadLetters: await list() };
      }
    } catch {
      // the run kills database connections on purpose: poll again
    }
  }
  return { complete: false, deadLetters: await listPatiently(list) };
}

/**
 * The dead letters once more at the end, tried again for a while when the broker is unavailable for a
 * moment (a cluster electing a leader after a node failure), so that the report still comes.
 */
async function listPatiently(list: () => Promise<readonly DeadLetter[]>): Promise<readonly DeadLetter[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await list();
    } catch (error) {
      if (attempt >= 30) throw error;
      await sleep(1000);
    }
  }
}
