import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { run } from './settle-outcome.js';

describe('the settle-outcome example', () => {
  it('settles by action and counts by kind', async () => {
    const db = new Database(':memory:');
    expect(await run(db)).toEqual({
      calls: ['ack', 'ack', 'dead-letter malformed', 'redeliver 10000ms as #2'],
      counts: { executed: 1, duplicate: 1, busy: 0, conflict: 0, retry: 1, dead: 1 },
    });
    db.close();
  });

  it('is quoted in the pipeline page exactly as it compiles', () => {
    const source = readFileSync(new URL('./settle-outcome.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/pipeline.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
