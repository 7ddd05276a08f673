/** What a tool that runs a statement either for its rows or for its affected count needs to know of it. */
export interface StatementKind {
  /** The statement's verb, upper case: `SELECT`, `INSERT`, … (the main one after `WITH …` and MariaDB's `SET STATEMENT … FOR`). */
  readonly verb: string;
  /** Whether the statement answers rows: a query, or a write with a top-level `RETURNING`. */
  readonly returnsRows: boolean;
}

/** Verbs of statements that answer rows. */
const ROW_VERBS: ReadonlySet<string> = new Set([
  'SELECT',
  'VALUES',
  'TABLE',
  'SHOW',
  'EXPLAIN',
  'FETCH',
  'DESCRIBE',
  'DESC',
  'HELP',
]);

/** Verbs that may follow a `WITH` list of common table expressions. */
const MAIN_VERBS: ReadonlySet<string> = new Set([
  'SELECT',
  'VALUES',
  'TABLE',
  'INSERT',
  'UPDATE',
  'DELETE',
  'MERGE',
  'REPLACE',
]);

interface Word {
  readonly word: string;
  readonly depth: number;
}

/** Index just past the quoted text that starts at `start` with `quote` (doubled quotes escape; backslashes too when `backslash`). */
function skipQuoted(sql: string, start: number, quote: string, backslash: boolean): number {
  let i = start + 1;
  while (i < sql.length) {
    const c = sql[i];
    if (backslash && c === '\\') i += 2;
    else if (c === quote && sql[i + 1] === quote) i += 2;
    else if (c === quote) return i + 1;
    else i++;
  }
  return i;
}

/**
 * The words of `sql` outside comments, string literals and quoted identifiers, each with its depth of
 * parentheses. PostgreSQL: `'…'` (backslash escapes after `E`), `"…"`, `$tag$…$tag$`, nested block
 * comments; MySQL: `'…'` and `"…"` with backslash escapes, `` `…` ``, `#` comments.
 */
function words(sql: string, database: 'postgres' | 'mysql'): Word[] {
  const mysql = database === 'mysql';
  const found: Word[] = [];
  let depth = 0;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i] ?? '';
    const next = sql[i + 1];
    if ((c === '-' && next === '-') || (mysql && c === '#')) {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end + 1;
    } else if (c === '/' && next === '*') {
      let nested = 1;
      i += 2;
      while (i < sql.length && nested > 0) {
        if (sql[i] === '*' && sql[i + 1] === '/') {
          nested--;
          i += 2;
        } else if (!mysql && sql[i] === '/' && sql[i + 1] === '*') {
          nested++;
          i += 2;
        } else i++;
      }
    } else if (c === "'") {
      const escaped = mysql || /[eE]$/.test(sql.slice(Math.max(0, i - 1), i));
      i = skipQuoted(sql, i, "'", escaped);
    } else if (c === '"') {
      i = skipQuoted(sql, i, '"', mysql);
    } else if (mysql && c === '`') {
      i = skipQuoted(sql, i, '`', false);
    } else if (!mysql && c === '$' && /^\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$/.test(sql.slice(i, i + 64))) {
      const tag = /^\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$/.exec(sql.slice(i, i + 64))?.[0] ?? '$$';
      const end = sql.indexOf(tag, i + tag.length);
      i = end === -1 ? sql.length : end + tag.length;
    } else if (c === '(') {
      depth++;
      i++;
    } else if (c === ')') {
      depth = Math.max(0, depth - 1);
      i++;
    } else if (/[A-Za-z_]/.test(c)) {
      const match = /^[A-Za-z_][A-Za-z_0-9$]*/.exec(sql.slice(i, i + 256));
      const word = match?.[0] ?? c;
      // `E'…'` is a string with escapes: leave its E to the quote that follows
      if (!(word.length === 1 && /[eE]/.test(word) && sql[i + 1] === "'")) {
        found.push({ word: word.toUpperCase(), depth });
      }
      i += word.length;
    } else {
      i++;
    }
  }
  return found;
}

/**
 * The verb of `sql` and whether it answers rows, read from its words outside comments, literals and
 * parentheses: a `RETURNING` inside a string, a comment or a common table expression does not make a
 * statement answer rows; `WITH … UPDATE` without `RETURNING` answers none.
 */
export function statementKind(sql: string, database: 'postgres' | 'mysql'): StatementKind {
  let all = words(sql, database);
  if (database === 'mysql' && all[0]?.word === 'SET' && all[1]?.word === 'STATEMENT') {
    const at = all.findIndex((w) => w.word === 'FOR' && w.depth === 0);
    all = at === -1 ? [] : all.slice(at + 1);
  }
  const first = all[0];
  if (first === undefined) return { verb: '', returnsRows: false };
  // a statement in parentheses, `(SELECT …) UNION (SELECT …)`, is read at its own depth
  const level = first.depth;
  const top = all.filter((w) => w.depth === level);
  let verb = first.word;
  let from = 0;
  if (verb === 'WITH') {
    from = top.findIndex((w, index) => index > 0 && MAIN_VERBS.has(w.word));
    verb = from === -1 ? 'WITH' : (top[from]?.word ?? 'WITH');
  }
  const returning = top.slice(Math.max(from, 0)).some((w) => w.word === 'RETURNING');
  return { verb, returnsRows: ROW_VERBS.has(verb) || returning };
}
