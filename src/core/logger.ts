import { DEFAULT_LOGGER, DISCARD } from './console-logger.js';

/** Where oncemq writes log lines: the message first, then the fields (console's order). */
export interface Logger {
  /** Detail for tracing one delivery: every outcome's line (group, key, brokerId, attempt, outcome). */
  debug(message: string, fields?: Record<string, unknown>): void;
  /** Something an operator may want to know: a ledger ready or closed, a stream or consumer created, a rebalance. */
  info(message: string, fields?: Record<string, unknown>): void;
  /** Something went wrong and was handled: a lost lease, a result that could not be stored. */
  warn(message: string, fields?: Record<string, unknown>): void;
  /** Something failed that needs a look: a listener threw, a delivery could not be settled at the broker. */
  error(message: string, fields?: Record<string, unknown>): void;
}

type PinoMethod = (fields: Record<string, unknown>, message: string) => void;

/**
 * A pino (or bunyan-style) logger: the fields first, then the message. Told from a console-style
 * logger by pino's `bindings()` and `child()`.
 */
export interface PinoLike {
  /** pino's `debug(fields, message)`. */
  debug: PinoMethod;
  /** pino's `info(fields, message)`. */
  info: PinoMethod;
  /** pino's `warn(fields, message)`. */
  warn: PinoMethod;
  /** pino's `error(fields, message)`. */
  error: PinoMethod;
  /** pino's `child(bindings)`; only its presence is checked, to tell a pino logger from a console-style one. */
  child(bindings: Record<string, unknown>): unknown;
  /** pino's `bindings()`; only its presence is checked, to tell a pino logger from a console-style one. */
  bindings(): Record<string, unknown>;
}

/** A console-style logger of which only `warn` and `error` are required; a missing level writes nothing. */
export type PartialLogger = Pick<Logger, 'warn' | 'error'> & Partial<Pick<Logger, 'debug' | 'info'>>;

/**
 * What a `logger` option takes: console, a pino logger, or any object with `warn` and `error` (and
 * optionally `info` and `debug`), as they are.
 */
export type LoggerLike = Logger | PartialLogger | PinoLike;

/** The logger that writes nothing: pass it as `logger` to turn oncemq's lines off. */
export const SILENT_LOGGER: Logger = Object.freeze({
  debug: DISCARD,
  info: DISCARD,
  warn: DISCARD,
  error: DISCARD,
});

const isPino = (logger: LoggerLike): logger is PinoLike =>
  typeof (logger as Partial<PinoLike>).bindings === 'function' &&
  typeof (logger as Partial<PinoLike>).child === 'function';

/**
 * A {@link Logger} of what the user gave: none, the default logger (warnings and errors to stderr,
 * rate-limited: {@link DEFAULT_LOGGER}); a console-style logger as it is, a missing `debug` or `info`
 * writing nothing; a pino logger called its own way (`logger.info(fields, message)`), so the fields
 * become properties of the JSON line.
 */
export function toLogger(logger: LoggerLike | undefined): Logger {
  if (logger === undefined) return DEFAULT_LOGGER;
  if (isPino(logger)) {
    const level =
      (name: 'debug' | 'info' | 'warn' | 'error') =>
      (message: string, fields?: Record<string, unknown>): void =>
        logger[name](fields ?? {}, message);
    return Object.freeze({
      debug: level('debug'),
      info: level('info'),
      warn: level('warn'),
      error: level('error'),
    });
  }
  if (typeof logger.debug === 'function' && typeof logger.info === 'function') return logger as Logger;
  const bound = (name: 'debug' | 'info') =>
    typeof logger[name] === 'function'
      ? (message: string, fields?: Record<string, unknown>): void => logger[name]?.(message, fields)
      : DISCARD;
  return Object.freeze({
    debug: bound('debug'),
    info: bound('info'),
    warn: (message: string, fields?: Record<string, unknown>): void => logger.warn(message, fields),
    error: (message: string, fields?: Record<string, unknown>): void => logger.error(message, fields),
  });
}

/**
 * Whether `logger` writes anything at `debug`: the silent logger and a console logger above debug do
 * not, so callers build no fields for their debug lines.
 */
export function logsDebug(logger: Logger): boolean {
  return logger.debug !== DISCARD;
}
