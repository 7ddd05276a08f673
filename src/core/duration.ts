import { ConfigError } from './errors.js';

/** A duration in milliseconds, or a string such as `1h`, `4h46m`, `500ms`, `7d`. */
export type Duration = number | string;

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;

/** Parses a {@link Duration} to milliseconds; `field` names the setting in the error. */
export function parseDuration(value: Duration, field: string): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) {
      throw new ConfigError(field, `expected a non-negative duration in milliseconds, got ${value}`);
    }
    return value;
  }
  const text = value.trim();
  if (text === '') throw new ConfigError(field, 'expected a duration such as "30s" or "4h46m", got ""');
  let total = 0;
  PART.lastIndex = 0;
  let consumed = 0;
  for (let match = PART.exec(text); match !== null; match = PART.exec(text)) {
    const [whole, amount = '0', unit = 'ms'] = match;
    total += Number(amount) * (UNIT_MS[unit] ?? 1);
    consumed += whole.length;
  }
  if (consumed !== text.length) {
    throw new ConfigError(field, `expected a duration such as "30s" or "4h46m", got "${value}"`);
  }
  return total;
}

/** Formats milliseconds as the shortest exact `1d2h3m4s5ms` form (`0ms` for zero). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0ms';
  let rest = Math.round(ms);
  let text = '';
  for (const unit of ['d', 'h', 'm', 's', 'ms'] as const) {
    const size = UNIT_MS[unit] ?? 1;
    const amount = Math.floor(rest / size);
    if (amount > 0) {
      text += `${amount}${unit}`;
      rest -= amount * size;
    }
  }
  return text;
}
