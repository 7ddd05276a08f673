import type { Finding, FindingStatus } from './findings.js';

/**
 * The ledger table as `oncemq migrate` creates it, read out of the ledgers' own DDL (the text of their
 * migrations), so that `oncemq doctor` never keeps a second copy of the schema to drift from the first.
 */
export interface TableShape {
  readonly columns: readonly ColumnShape[];
  readonly indexes: readonly IndexShape[];
}

export interface ColumnShape {
  readonly name: string;
  /** The type as written (`timestamptz`, `VARBINARY(128)`), or as the database reports it. */
  readonly type: string;
  readonly notNull: boolean;
}

export interface IndexShape {
  /** The key's columns, in order. */
  readonly columns: readonly string[];
  /** A primary key or unique index. */
  readonly unique: boolean;
}

/** The words after a column's type that end it (`NOT NULL`, `DEFAULT 1`, `CHARACTER SET ascii`…). */
const AFTER_TYPE = /^(NOT|NULL|DEFAULT|CHECK|PRIMARY|UNIQUE|CHARACTER|COLLATE|REFERENCES|GENERATED)$/i;

/** Splits `text` at the commas outside parentheses. */
function topLevelParts(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (char === '(') depth++;
    else if (char === ')') depth--;
    else if (char === ',' && depth === 0) {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(text.slice(start).trim());
  return parts.filter((part) => part !== '');
}

/** The text between the parenthesis at `open` and its match. */
function parenthesized(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return text.slice(open + 1, i);
  }
  throw new Error('unbalanced parentheses in the ledger DDL');
}

const columnList = (list: string): string[] =>
  list.split(',').map((name) => name.trim().replace(/^[`"]|[`"]$/g, ''));

/**
 * The columns, primary key and indexes of the ledger table in `ddl`: one `CREATE TABLE` with its
 * column and key definitions (`PRIMARY KEY (…)`, MySQL's `KEY name (…)`), then any `CREATE INDEX`.
 */
export function parseLedgerDdl(ddl: string): TableShape {
  const create = /CREATE TABLE[^(]*\(/i.exec(ddl);
  if (create === null) throw new Error('no CREATE TABLE in the ledger DDL');
  const body = parenthesized(ddl, create.index + create[0].length - 1);
  const columns: ColumnShape[] = [];
  const indexes: IndexShape[] = [];
  for (const part of topLevelParts(body)) {
    const key = /^(PRIMARY KEY|UNIQUE KEY\s+\S+|UNIQUE|KEY\s+\S+|INDEX\s+\S+)\s*\(([^)]*)\)/i.exec(part);
    if (key !== null) {
      indexes.push({ columns: columnList(key[2] ?? ''), unique: /^(PRIMARY|UNIQUE)/i.test(key[1] ?? '') });
      continue;
    }
    if (/^(CHECK|CONSTRAINT)\b/i.test(part)) continue;
    const words = part.split(/\s+/);
    const name = (words[0] ?? '').replace(/^[`"]|[`"]$/g, '');
    const typeWords: string[] = [];
    for (const word of words.slice(1)) {
      if (AFTER_TYPE.test(word)) break;
      typeWords.push(word);
    }
    columns.push({ name, type: typeWords.join(' '), notNull: /\bNOT NULL\b/i.test(part) });
  }
  for (const index of ddl.matchAll(/CREATE (UNIQUE )?INDEX [^(]*?\bON\s+\S+\s*\(([^)]*)\)/gi)) {
    indexes.push({ columns: columnList(index[2] ?? ''), unique: index[1] !== undefined });
  }
  return { columns, indexes };
}

/** How a database tells two column types apart. */
export interface TypeRules {
  /** The expected type (as the DDL writes it) in the form the database reports types. */
  normalize(type: string): string;
}

const baseType = (type: string): string => type.replace(/\(.*\)/, '').trim();

interface Problem {
  readonly status: FindingStatus;
  readonly text: string;
}

function columnProblems(expected: TableShape, actual: TableShape, rules: TypeRules): Problem[] {
  const problems: Problem[] = [];
  for (const column of expected.columns) {
    const found = actual.columns.find((candidate) => candidate.name === column.name);
    if (found === undefined) {
      problems.push({ status: 'fail', text: `column ${column.name} is missing` });
      continue;
    }
    const want = rules.normalize(column.type);
    if (found.type !== want) {
      const status = baseType(found.type) === baseType(want) ? 'warn' : 'fail';
      problems.push({ status, text: `column ${column.name} is ${found.type}, expected ${want}` });
    }
    if (column.notNull && !found.notNull) {
      problems.push({ status: 'warn', text: `column ${column.name} allows NULL, expected NOT NULL` });
    }
  }
  return problems;
}

function indexProblems(expected: TableShape, actual: TableShape): Problem[] {
  const problems: Problem[] = [];
  for (const index of expected.indexes) {
    const key = index.columns.join(', ');
    if (index.unique) {
      const same = (columns: readonly string[]): boolean =>
        columns.length === index.columns.length && index.columns.every((name) => columns.includes(name));
      if (!actual.indexes.some((candidate) => candidate.unique && same(candidate.columns))) {
        problems.push({
          status: 'fail',
          text: `no unique key on (${key}): two claims of one key can both insert, and the claim is no longer atomic`,
        });
      }
    } else if (!actual.indexes.some((candidate) => candidate.columns.join(', ') === key)) {
      problems.push({
        status: 'warn',
        text: `no index on (${key}): the purge and stuck scans read the whole table`,
      });
    }
  }
  return problems;
}

/** `ledger.schema` of a table that exists: its columns and keys against those `oncemq migrate` makes. */
export function schemaFinding(
  table: string,
  expected: TableShape,
  actual: TableShape,
  rules: TypeRules,
  fix: string,
): Finding {
  const problems = [...columnProblems(expected, actual, rules), ...indexProblems(expected, actual)];
  const detail = { table, expected, actual, problems };
  if (problems.length === 0) {
    return {
      check: 'ledger.schema',
      status: 'ok',
      summary: `${table}: ${expected.columns.length} columns and ${expected.indexes.length} keys as oncemq migrate makes them`,
      detail,
    };
  }
  const status = problems.some((problem) => problem.status === 'fail') ? 'fail' : 'warn';
  return {
    check: 'ledger.schema',
    status,
    summary: `${table}: ${problems.map((problem) => problem.text).join('; ')}`,
    fix,
    detail,
  };
}

/** `ledger.schema` of a table that is not there. */
export function missingTableFinding(what: string, migrate: string): Finding {
  return {
    check: 'ledger.schema',
    status: 'fail',
    summary: `${what} does not exist (doctor creates nothing)`,
    fix: `create it with \`${migrate}\``,
  };
}
