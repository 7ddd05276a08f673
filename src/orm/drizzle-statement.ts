import { sql, type SQL, type SQLChunk } from 'drizzle-orm';

/** How a statement's text marks its values: PostgreSQL's `$n`, or `?` in order (MySQL, SQLite). */
export type PlaceholderStyle = 'numbered' | 'ordered';

/** A placeholder of `style` at `text[at]`: its length and the index of its value, else undefined. */
function placeholderAt(
  text: string,
  at: number,
  style: PlaceholderStyle,
  ordinal: number,
): { readonly length: number; readonly index: number } | undefined {
  if (style === 'ordered') return text[at] === '?' ? { length: 1, index: ordinal } : undefined;
  if (text[at] !== '$') return undefined;
  const digits = /^\d+/.exec(text.slice(at + 1, at + 12))?.[0];
  return digits === undefined ? undefined : { length: 1 + digits.length, index: Number(digits) - 1 };
}

/**
 * Where the quoted literal or identifier opened by `text[at]` ends (after its closing quote): a
 * doubled quote is part of it, and so is a character after a backslash where `backslash` (MySQL).
 */
function quotedEnd(text: string, at: number, backslash: boolean): number {
  const quote = text[at];
  let i = at + 1;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && backslash && quote !== '`') i += 2;
    else if (c === quote && text[i + 1] === quote) i += 2;
    else if (c === quote) return i + 1;
    else i++;
  }
  return text.length;
}

/**
 * A statement of a ledger (its text with `$n` or `?` placeholders, and its values) as a Drizzle `SQL`
 * object: the text between placeholders as raw chunks, each value as a bound parameter
 * (`sql.param`), which Drizzle numbers again for its driver. A `$1` used twice binds its value twice;
 * placeholders inside quoted literals and identifiers are text (a backslash escapes in MySQL's, not
 * in PostgreSQL's). A value is never put in the text.
 */
export function drizzleStatement(text: string, values: readonly unknown[], style: PlaceholderStyle): SQL {
  const chunks: SQLChunk[] = [];
  let start = 0;
  let ordinal = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "'" || c === '"' || c === '`') {
      i = quotedEnd(text, i, style === 'ordered');
      continue;
    }
    const placeholder = placeholderAt(text, i, style, ordinal);
    if (placeholder === undefined) {
      i++;
      continue;
    }
    if (i > start) chunks.push(sql.raw(text.slice(start, i)));
    chunks.push(sql.param(values[placeholder.index] ?? null));
    ordinal++;
    i += placeholder.length;
    start = i;
  }
  if (start < text.length) chunks.push(sql.raw(text.slice(start)));
  return sql.join(chunks);
}
