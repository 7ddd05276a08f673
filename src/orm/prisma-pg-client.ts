import type { PgClientLike } from '../ledger/postgres/postgres-client.js';
import { pgShim } from './shims.js';
import { isVoidColumnError, prismaDriverError } from './prisma-driver-error.js';
import type { PrismaQueryableLike } from './prisma-bridge.js';
import { statementKind } from './statement-kind.js';

/** A value as pg returns it: int8 as text, bytea as a Buffer, numeric as text. */
function pgValue(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (Array.isArray(value)) return value.map(pgValue);
  // Prisma's Decimal (numeric)
  const decimal = value as { toFixed?: unknown; toString(): string };
  if (typeof decimal.toFixed === 'function') return decimal.toString();
  return value;
}

function pgRows(result: unknown): Record<string, unknown>[] {
  if (!Array.isArray(result)) return [];
  return result.map((row: Record<string, unknown>) => {
    const out: Record<string, unknown> = {};
    for (const [column, value] of Object.entries(row)) out[column] = pgValue(value);
    return out;
  });
}

/**
 * A pg-shaped client over a Prisma client or interactive-transaction client (`$queryRawUnsafe`,
 * `$executeRawUnsafe`, `$n` placeholders as they are). Prisma answers either a statement's rows or
 * its affected count, so each statement goes where its answer is: one that answers rows (a query, a
 * write with `RETURNING`) to `$queryRawUnsafe`, with `rowCount` the number of rows; any other (an
 * `UPDATE` whose count decides, DDL, `SAVEPOINT`) to `$executeRawUnsafe`. A query of a `void`
 * function (an advisory lock) ran, but Prisma cannot read its column: it answers no rows. Values come
 * back as pg gives them (int8 and numeric as text); Prisma's errors carry the SQLSTATE as `code`.
 */
export function prismaPgClient(q: PrismaQueryableLike): PgClientLike {
  return pgShim(async (text, values) => {
    const args = values.map((value) => value ?? null);
    try {
      if (!statementKind(text, 'postgres').returnsRows) {
        return { rows: [], rowCount: await q.$executeRawUnsafe(text, ...args) };
      }
      const rows = pgRows(await q.$queryRawUnsafe(text, ...args));
      return { rows, rowCount: rows.length };
    } catch (error) {
      if (isVoidColumnError(error)) return { rows: [], rowCount: null };
      throw prismaDriverError(error, 'postgres');
    }
  });
}
