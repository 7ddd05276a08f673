// The default logger: warnings and errors as one line each, each kind of line limited per interval
// with the count of the lines held back, on a fake clock and an injected sink.
import { describe, expect, it } from 'vitest';
import { ConfigError, consoleLogger, DEFAULT_LOGGER, SILENT_LOGGER, type PartialLogger } from 'oncemq';
import { LogRateLimit, logsDebug, MAX_LOG_KINDS, toLogger } from '../support/internal.js';

function fakeClock(start = Date.UTC(2026, 0, 5, 10, 0, 0)) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

describe('LogRateLimit', () => {
  it('lets the first lines of a kind through, holds back the rest of the interval, and counts them when the kind resumes', () => {
    const clock = fakeClock();
    const limit = new LogRateLimit({ lines: 3, intervalMs: 60_000, clock: clock.now });
    expect([limit.admit('a'), limit.admit('a'), limit.admit('a')]).toEqual([0, 0, 0]);
    expect(limit.admit('a')).toBeUndefined();
    clock.advance(59_999);
    expect(limit.admit('a')).toBeUndefined();
    clock.advance(1);
    // the interval has passed: the next line goes out with the two held back
    expect(limit.admit('a')).toBe(2);
    expect(limit.admit('a')).toBe(0);
  });

  it('limits each kind on its own', () => {
    const clock = fakeClock();
    const limit = new LogRateLimit({ lines: 1, intervalMs: 1000, clock: clock.now });
    expect(limit.admit('dead-lettered (poison)')).toBe(0);
    expect(limit.admit('dead-lettered (poison)')).toBeUndefined();
    expect(limit.admit('retry scheduled')).toBe(0);
  });

  it('keeps at most MAX_LOG_KINDS kinds, forgetting first those whose interval ended with nothing held back', () => {
    const clock = fakeClock();
    const limit = new LogRateLimit({ lines: 1, intervalMs: 1000, clock: clock.now });
    limit.admit('held');
    limit.admit('held'); // one held back: this kind keeps its count
    for (let kind = 1; kind < MAX_LOG_KINDS; kind++) limit.admit(`k${kind}`);
    clock.advance(1000);
    expect(limit.kinds).toBe(MAX_LOG_KINDS);
    limit.admit('new kind'); // the map is full: the ended kinds without a count go
    expect(limit.kinds).toBe(2);
    expect(limit.admit('held')).toBe(1);
  });
});

describe('consoleLogger', () => {
  const sink = () => {
    const lines: string[] = [];
    return { lines, write: (line: string) => void lines.push(line) };
  };

  it('writes warnings and errors as one line each — time, level, message, fields — and nothing below warn', () => {
    const clock = fakeClock();
    const out = sink();
    const logger = consoleLogger({ write: out.write, clock: clock.now });
    logger.debug('oncemq: executed', { key: 'k' });
    logger.info('oncemq: ledger ready');
    logger.warn('oncemq: dead-lettered (retries-exhausted)', {
      group: 'points',
      key: 'order 7',
      attempt: 17,
      charged: true,
      missing: undefined,
      error: 'SqliteError: no such table: orders\n  at line 2',
    });
    logger.error('oncemq: the processor threw', { cause: new Error('boom'), extra: { a: 1 } });
    expect(out.lines).toEqual([
      '2026-01-05T10:00:00.000Z WARN oncemq: dead-lettered (retries-exhausted) group=points key="order 7" attempt=17 charged=true error="SqliteError: no such table: orders\\n  at line 2"\n',
      '2026-01-05T10:00:00.000Z ERROR oncemq: the processor threw cause="Error: boom" extra={"a":1}\n',
    ]);
  });

  it('holds back a flood of one kind and says how many lines it held back when the kind resumes', () => {
    const clock = fakeClock();
    const out = sink();
    const logger = consoleLogger({
      write: out.write,
      clock: clock.now,
      linesPerInterval: 2,
      interval: '10s',
    });
    for (let i = 0; i < 50; i++) logger.warn('oncemq: the handler failed; retry scheduled', { key: `k${i}` });
    logger.warn('oncemq: dead-lettered (malformed)', { key: 'p1' });
    expect(out.lines.map((line) => line.slice(25).trimEnd())).toEqual([
      'WARN oncemq: the handler failed; retry scheduled key=k0',
      'WARN oncemq: the handler failed; retry scheduled key=k1',
      'WARN oncemq: dead-lettered (malformed) key=p1',
    ]);
    clock.advance(10_000);
    logger.warn('oncemq: the handler failed; retry scheduled', { key: 'k50' });
    expect(out.lines.at(-1)).toBe(
      '2026-01-05T10:00:10.000Z WARN oncemq: the handler failed; retry scheduled key=k50 suppressed=48\n',
    );
  });

  it('writes from the level asked for, and every line with linesPerInterval Infinity', () => {
    const out = sink();
    const logger = consoleLogger({ write: out.write, level: 'debug', linesPerInterval: Infinity });
    for (let i = 0; i < 100; i++) logger.debug('oncemq: duplicate');
    expect(out.lines).toHaveLength(100);
    expect(logsDebug(logger)).toBe(true);
    expect(logsDebug(consoleLogger({ write: out.write }))).toBe(false);
    expect(logsDebug(SILENT_LOGGER)).toBe(false);
  });

  it('never throws, whatever the sink or the fields do', () => {
    const logger = consoleLogger({
      write: () => {
        throw new Error('disk full');
      },
    });
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(() => {
      logger.error('oncemq: x', { circular, fn: () => 1 });
    }).not.toThrow();
  });

  it('refuses a level or a limit that cannot work, naming the field', () => {
    expect(() => consoleLogger({ level: 'loud' as 'warn' })).toThrow(ConfigError);
    expect(() => consoleLogger({ linesPerInterval: 0 })).toThrow(/linesPerInterval/);
    expect(() => consoleLogger({ interval: 'soon' })).toThrow(/interval/);
  });
});

describe('toLogger', () => {
  it('gives the default logger when none is given, and a logger with only warn and error the rest as no-ops', () => {
    expect(toLogger(undefined)).toBe(DEFAULT_LOGGER);
    const seen: string[] = [];
    const partial: PartialLogger = {
      warn: (message) => seen.push(`w ${message}`),
      error: (message) => seen.push(`e ${message}`),
    };
    const logger = toLogger(partial);
    logger.debug('d');
    logger.info('i');
    logger.warn('w1');
    logger.error('e1');
    expect(seen).toEqual(['w w1', 'e e1']);
    expect(logsDebug(logger)).toBe(false);
  });
});
