import { parseDuration, type Duration } from './duration.js';
import { ConfigError } from './errors.js';
import { LogRateLimit } from './log-rate-limit.js';
import type { Logger } from './logger.js';

/** A logger's levels, lowest first. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** What {@link consoleLogger} takes; every field is optional. */
export interface ConsoleLoggerConfig {
  /** Where each line goes, its newline included. @default a write to `process.stderr` */
  readonly write?: (line: string) => void;
  /** The lowest level written; lower ones cost nothing. @default 'warn' */
  readonly level?: LogLevel;
  /**
   * Lines of one kind (one level and message: `oncemq: dead-lettered (retries-exhausted)`) written per
   * `interval`; the kind's later lines in that interval are counted, and the next line written of the
   * kind carries the count as `suppressed=N`. `Infinity` writes every line. @default 10
   */
  readonly linesPerInterval?: number;
  /** The interval of `linesPerInterval`. @default '1m' */
  readonly interval?: Duration;
  /** Milliseconds now, for the line's time and the interval. @default Date.now */
  readonly clock?: () => number;
}

/** The defaults of {@link ConsoleLoggerConfig} (the sink and the clock aside). */
export const DEFAULT_CONSOLE_LOGGER_CONFIG: Readonly<{
  /** Warnings and errors are written; info and debug are not. */
  level: LogLevel;
  /** Ten lines of one kind per interval. */
  linesPerInterval: number;
  /** A minute. */
  interval: Duration;
}> = Object.freeze({ level: 'warn', linesPerInterval: 10, interval: '1m' });

/** A logger method that writes nothing: levels below a logger's own, and every level of the silent logger. */
export const DISCARD = (): void => undefined;

const writeStderr = (line: string): void => {
  process.stderr.write(line);
};

/** A field's value in a line: bare when it is one plain word, else as JSON (so the line stays one line). */
function fieldValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=\\]+$/.test(value) ? value : JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (typeof value === 'bigint') return `${value}`;
  if (value instanceof Error) return JSON.stringify(`${value.name}: ${value.message}`);
  if (typeof value !== 'object') return `"[${typeof value}]"`;
  try {
    return JSON.stringify(value);
  } catch {
    return '"[unprintable]"';
  }
}

/** One line: time, level, message, then the fields as `name=value`. */
function formatLine(
  now: number,
  level: LogLevel,
  message: string,
  fields: Record<string, unknown> | undefined,
  suppressed: number,
): string {
  let line = `${new Date(now).toISOString()} ${level.toUpperCase()} ${message.replace(/[\r\n]+/g, ' ')}`;
  if (fields !== undefined) {
    for (const [name, value] of Object.entries(fields)) {
      if (value !== undefined) line += ` ${name}=${fieldValue(value)}`;
    }
  }
  if (suppressed > 0) line += ` suppressed=${suppressed}`;
  return `${line}\n`;
}

/**
 * A {@link Logger} writing one line per call — `2026-01-05T10:00:00.000Z WARN oncemq: dead-lettered
 * (retries-exhausted) group=points key=order-7 attempt=17 error="Error: …"` — to stderr (or `write`),
 * from `level` up, each kind of line limited to `linesPerInterval` per `interval`
 * (docs/observability.md, "Logging"). It never throws: a sink that throws loses the line.
 */
export function consoleLogger(config: ConsoleLoggerConfig = {}): Logger {
  const d = DEFAULT_CONSOLE_LOGGER_CONFIG;
  const level = config.level ?? d.level;
  if (!LEVELS.includes(level)) {
    throw new ConfigError('level', `must be one of ${LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  }
  const lines = config.linesPerInterval ?? d.linesPerInterval;
  if (!(lines >= 1)) {
    throw new ConfigError('linesPerInterval', `must be at least 1 (Infinity for no limit), got ${lines}`);
  }
  const intervalMs = parseDuration(config.interval ?? d.interval, 'interval');
  const write = config.write ?? writeStderr;
  const clock = config.clock ?? Date.now;
  const limit = new LogRateLimit({ lines, intervalMs, clock });
  const lowest = LEVELS.indexOf(level);
  const method = (name: LogLevel): Logger[LogLevel] => {
    if (LEVELS.indexOf(name) < lowest) return DISCARD;
    return (message, fields) => {
      try {
        const suppressed = limit.admit(`${name} ${message}`);
        if (suppressed === undefined) return;
        write(formatLine(clock(), name, message, fields, suppressed));
      } catch {
        // A log line must never become the caller's failure.
      }
    };
  };
  return Object.freeze({
    debug: method('debug'),
    info: method('info'),
    warn: method('warn'),
    error: method('error'),
  });
}

/**
 * The logger of everything given no `logger`: {@link consoleLogger} with its defaults — warnings and
 * errors to stderr, at most 10 lines of a kind a minute. One instance, so the limit holds for the
 * whole process.
 */
export const DEFAULT_LOGGER: Logger = consoleLogger();
