import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { run } from './batch-points.js';

describe('the batch-points example', () => {
  it('hands the batch handler the won events of a batch at once, and replays their results to duplicates', async () => {
    const db = new Database(':memory:');
    expect(await run(db)).toEqual({
      outcomes: [
        ['executed {"batchOf":3}', 'executed {"batchOf":3}', 'executed {"batchOf":3}'],
        ['duplicate {"batchOf":3}', 'executed {"batchOf":1}'],
      ],
      balances: { alice: 200, bob: 200 },
    });
    db.close();
  });

  it('is quoted in the pipeline page exactly as it compiles', () => {
    const source = readFileSync(new URL('./batch-points.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/pipeline.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
