import type { MysqlConnectionLike, MysqlResultHeader, MysqlValue } from '../ledger/mysql/mysql-client.js';
import type { PrismaQueryableLike } from './prisma-bridge.js';
import { prismaDriverError } from './prisma-driver-error.js';
import { statementKind } from './statement-kind.js';

/** Runs `work` with statements that all go to one connection (a transaction of Prisma's). */
export type OnOneConnection = <T>(work: (q: PrismaQueryableLike) => Promise<T>) => Promise<T>;

/** A value as mysql2 returns it: BIGINT as a number (as text past 2^53), binary as a Buffer, DECIMAL as text. */
function mysqlValue(value: unknown): unknown {
  if (typeof value === 'bigint') {
    return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
      ? Number(value)
      : value.toString();
  }
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  // Prisma's Decimal
  const decimal = value as { toFixed?: unknown; toString(): string };
  if (typeof decimal.toFixed === 'function') return decimal.toString();
  return value;
}

function mysqlRows(result: unknown): Record<string, unknown>[] {
  if (!Array.isArray(result)) return [];
  return result.map((row: Record<string, unknown>) => {
    const out: Record<string, unknown> = {};
    for (const [column, value] of Object.entries(row)) out[column] = mysqlValue(value);
    return out;
  });
}

/**
 * An INSERT's OK packet: Prisma answers the affected count only, so the insert id (what the ledger's
 * claim reads: 0 for a new row, the row's attempt for a duplicate through `LAST_INSERT_ID(attempt)`)
 * is read back on the same connection, the connection's value first set to 0 — left alone by an
 * insert into a table without AUTO_INCREMENT, as the OK packet's 0 is.
 */
async function insert(q: PrismaQueryableLike, sql: string, values: unknown[]): Promise<MysqlResultHeader> {
  await q.$executeRawUnsafe('SELECT LAST_INSERT_ID(0)');
  const affectedRows = await q.$executeRawUnsafe(sql, ...values);
  const [row] = mysqlRows(await q.$queryRawUnsafe('SELECT LAST_INSERT_ID() AS id'));
  return { affectedRows, insertId: Number(row?.id ?? 0) };
}

/**
 * A mysql2-shaped connection over a Prisma client or interactive-transaction client. A statement that
 * answers rows goes to `$queryRawUnsafe` and answers `[rows]`; any other to `$executeRawUnsafe` and
 * answers `[okPacket]` with `affectedRows` (rows an UPDATE matched: Prisma's MariaDB adapter connects
 * with CLIENT_FOUND_ROWS); an INSERT reads its insert id back with two more statements on the same
 * connection (`oneConnection`: the transaction itself, or a short transaction of its own in
 * autocommit). Values come back as mysql2 gives them; Prisma's errors carry the error number
 * (`errno`) and mysql2's `code`.
 */
export function prismaMysqlConnection(
  q: PrismaQueryableLike,
  oneConnection: OnOneConnection,
): MysqlConnectionLike {
  const run = async (
    sql: string,
    values: readonly MysqlValue[] = [],
  ): Promise<readonly [unknown, unknown]> => {
    const args = values.map((value) => value ?? null);
    const kind = statementKind(sql, 'mysql');
    try {
      if (kind.returnsRows) return [mysqlRows(await q.$queryRawUnsafe(sql, ...args)), undefined];
      if (kind.verb === 'INSERT' || kind.verb === 'REPLACE') {
        return [await oneConnection((c) => insert(c, sql, args)), undefined];
      }
      const header: MysqlResultHeader = {
        affectedRows: await q.$executeRawUnsafe(sql, ...args),
        insertId: 0,
      };
      return [header, undefined];
    } catch (error) {
      throw prismaDriverError(error, 'mysql');
    }
  };
  return {
    query: (sql) => run(sql),
    execute: (sql, values) => run(sql, values),
  };
}
