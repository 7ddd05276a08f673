import { ConfigError } from '../core/errors.js';

/**
 * Checks, for a ledger opened with `migrate: false`, that its table was made by `oncemq migrate` at
 * the schema version this oncemq knows. `found` is the recorded version, or undefined when the table
 * (or its database, schema or file) does not exist; `fix` is the command that makes it.
 */
export function checkSchemaVersion(
  found: number | undefined,
  expected: number,
  table: string,
  fix: string,
): void {
  if (found === undefined) {
    throw new ConfigError(
      'table',
      `the ledger table ${table} does not exist, and this ledger does not migrate (migrate: false); create it with \`${fix}\``,
    );
  }
  if (found < expected) {
    throw new ConfigError(
      'table',
      `the ledger table ${table} is at schema version ${found}, this oncemq needs ${expected}; upgrade it with \`${fix}\``,
    );
  }
  if (found > expected) {
    throw new ConfigError(
      'table',
      `the ledger table ${table} is at schema version ${found}, newer than this oncemq knows (${expected}); upgrade oncemq`,
    );
  }
}
