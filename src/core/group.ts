import { ConfigError } from './errors.js';

/** Consumer group names: 1–128 of letters, digits and `_ . : % | -` (RocketMQ's group alphabet). */
export const GROUP_PATTERN = /^[A-Za-z0-9_.:%|-]{1,128}$/;

/** Validates a consumer group name from configuration. */
export function validateGroup(value: unknown, field = 'group'): string {
  if (typeof value !== 'string' || !GROUP_PATTERN.test(value)) {
    throw new ConfigError(
      field,
      `${JSON.stringify(value)} is not a valid consumer group; use 1 to 128 letters, digits or _ . : % | -`,
    );
  }
  return value;
}
