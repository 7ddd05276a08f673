// How an ordered NATS member on one partition count follows its group's count record: a drain from its
// count bounds what it runs, a drain finished (or another count recorded) stops it, saying why.
import { describe, expect, it } from 'vitest';
import { type Logger, SILENT_LOGGER } from 'oncemq';
import { CountWatch } from '../support/internal.js';

const message = (stream: string, seq: number) => ({ seq, info: { stream } });

/** A logger that keeps the level of each line. */
function levels(): { logger: Logger; seen: string[] } {
  const seen: string[] = [];
  const keep = (level: string) => () => {
    seen.push(level);
  };
  return {
    seen,
    logger: { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') },
  };
}

describe('the partition count record as an ordered NATS member follows it', () => {
  it('runs everything while the record names its count', () => {
    const watch = new CountWatch('points', 2, undefined, SILENT_LOGGER);
    expect(watch.follow({ count: 2, seq: 1 })).toBe(true);
    expect(watch.beyond(message('ONCEMQ_orders', 1_000))).toBe(false);
    expect(watch.follow(null)).toBe(true);
  });

  it('while its count is drained, leaves the messages after the bound of their stream to the new count', () => {
    const watch = new CountWatch('points', 2, undefined, SILENT_LOGGER);
    const drain = { from: 2, bounds: { ONCEMQ_orders: 40, ONCEMQ_refunds: 7 } };
    expect(watch.follow({ count: 4, seq: 2, drain })).toBe(true);
    expect(watch.beyond(message('ONCEMQ_orders', 40))).toBe(false);
    expect(watch.beyond(message('ONCEMQ_orders', 41))).toBe(true);
    expect(watch.beyond(message('ONCEMQ_refunds', 8))).toBe(true);
    expect(watch.failure).toBeUndefined();
  });

  it('stops once the drain is finished, with a ConfigError naming both counts', () => {
    const { logger, seen } = levels();
    const watch = new CountWatch('points', 2, undefined, logger);
    expect(watch.follow({ count: 4, seq: 2, drain: { from: 2, bounds: { ONCEMQ_orders: 40 } } })).toBe(true);
    expect(watch.follow({ count: 4, seq: 3 })).toBe(false);
    expect(watch.failure?.message).toMatch(
      /partitions: group 'points' moved from 2 to 4 partitions.*Configure 4/,
    );
    expect(seen).toContain('error');
  });

  it('stops without an error line when it is the old count of a member on the new one', () => {
    const { logger, seen } = levels();
    const watch = new CountWatch('points', 2, 4, logger);
    expect(watch.follow({ count: 4, seq: 3 })).toBe(false);
    expect(seen).not.toContain('error');
  });

  it('runs everything on the new count while the drain to it is recorded', () => {
    const watch = new CountWatch('points', 4, undefined, SILENT_LOGGER);
    expect(watch.follow({ count: 4, seq: 2, drain: { from: 2, bounds: { ONCEMQ_orders: 40 } } })).toBe(true);
    expect(watch.beyond(message('ONCEMQ_orders', 41))).toBe(false);
  });
});
