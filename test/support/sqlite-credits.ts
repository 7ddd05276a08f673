import Database from 'better-sqlite3';

/** Creates the `credits` table of the SQLite pipeline tests (one row per applied effect) in the file at `path`, in WAL mode. */
export function createCreditsTable(path: string): void {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.exec(
      'CREATE TABLE credits (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, user_id TEXT NOT NULL, amount INTEGER NOT NULL)',
    );
  } finally {
    db.close();
  }
}

/** Points per user in the `credits` table, as committed (read through `reader`, a connection of its own). */
export function creditBalances(reader: Database.Database): Record<string, number> {
  const rows = reader
    .prepare('SELECT user_id AS userId, SUM(amount) AS total FROM credits GROUP BY user_id ORDER BY user_id')
    .all() as { userId: string; total: number }[];
  return Object.fromEntries(rows.map((r) => [r.userId, r.total]));
}
