import { ConfigError } from '../core/errors.js';

/** Table and schema names: a letter or underscore, then letters, digits, underscores; 63 at most. */
export const SQL_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Validates an identifier taken from configuration. Anything else (spaces, quotes, `;`, dots) is
 * refused at start-up rather than escaped, so a hostile name can never reach SQL text.
 */
export function sqlIdentifier(value: unknown, field: string): string {
  if (typeof value !== 'string' || !SQL_IDENTIFIER.test(value)) {
    throw new ConfigError(
      field,
      `${JSON.stringify(value)} is not a safe SQL identifier; use letters, digits and underscores (at most 63, not starting with a digit)`,
    );
  }
  return value;
}

/** Quotes a validated identifier with double quotes (SQLite, PostgreSQL). */
export function quoteIdentifier(name: string): string {
  return `"${name}"`;
}
