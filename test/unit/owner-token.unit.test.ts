import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { MAX_OWNER_LENGTH, ownerToken } from '../support/internal.js';
import { buildPackage } from '../support/built-package.js';

describe('ownerToken', () => {
  it('never repeats within a process, and fits the ledgers owner column even at the last counter', () => {
    const tokens = Array.from({ length: 10_000 }, () => ownerToken());
    expect(new Set(tokens).size).toBe(tokens.length);
    for (const token of tokens) expect(token).toMatch(/^[0-9a-f-]{36}\.[0-9a-z]+$/);
    const [process] = (tokens[0] ?? '').split('.');
    expect(`${process}.${Number.MAX_SAFE_INTEGER.toString(36)}`.length).toBeLessThanOrEqual(MAX_OWNER_LENGTH);
  });

  it('differs between two processes that issued the same count', () => {
    const module = pathToFileURL(join(buildPackage().dir, 'ledger', 'owner-token.js')).href;
    const script = `import('${module}').then((m) => console.log(m.ownerToken()))`;
    const run = (): string => execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).trim();
    const [first, second] = [run(), run()];
    expect(first.endsWith('.1')).toBe(true);
    expect(second.endsWith('.1')).toBe(true);
    expect(first).not.toBe(second);
  });
});
