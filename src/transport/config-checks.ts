import { parseDuration, type Duration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';

/**
 * `value` when it is a whole number from `min` to `max`, else a `ConfigError` naming `field`. The checks
 * every transport's settings and subscribe options share, so one option reads the same on each broker.
 */
export function wholeNumber(value: number, field: string, min = 1, max = Number.POSITIVE_INFINITY): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.POSITIVE_INFINITY ? `>= ${min}` : `from ${min} to ${max}`;
    throw new ConfigError(field, `must be a whole number ${range}, got ${value}`);
  }
  return value;
}

/** `value` in whole milliseconds when it parses and is at least `minMs`, else a `ConfigError` naming `field`. */
export function durationMs(value: Duration, field: string, minMs: number): number {
  const ms = parseDuration(value, field);
  if (ms < minMs) throw new ConfigError(field, `must be at least ${minMs}ms, got ${ms}ms`);
  return Math.round(ms);
}

/**
 * The config a transport's constructor was given, when it is an object; else a `ConfigError` naming
 * `field` with `expected` (what to pass), rather than a `TypeError` from the first setting read.
 */
export function configObject<C>(config: C, field: string, expected: string): C {
  if (typeof config !== 'object' || config === null) {
    throw new ConfigError(field, `${expected}, got ${config === null ? 'null' : typeof config}`);
  }
  return config;
}

/** What a transport whose every setting has a default expects of its config. */
export const OPTIONAL_CONFIG = 'pass an object of settings, or none for the defaults';
