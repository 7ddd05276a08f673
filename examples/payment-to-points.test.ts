import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { run } from './payment-to-points.js';

describe('the payment-to-points example', () => {
  it('applies one event delivered three times once, telling redelivery from republish', async () => {
    const db = new Database(':memory:');
    expect(await run(db)).toEqual({
      actions: ['executed', 'duplicate (redelivery)', 'duplicate (republish)'],
      balance: 100,
    });
    db.close();
  });

  it('is quoted in the README exactly as it compiles', () => {
    const source = readFileSync(new URL('./payment-to-points.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(readme).toContain(region?.trim());
  });
});
