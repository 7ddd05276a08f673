import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string): unknown =>
  JSON.parse(readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8'));

const pkg = read('package.json') as {
  exports: Record<string, unknown>;
  scripts: Record<string, string>;
};
const typedoc = read('typedoc.json') as {
  entryPoints: string[];
  validation: Record<string, boolean>;
  treatValidationWarningsAsErrors: boolean;
};

describe('the API reference (typedoc.json)', () => {
  it('covers every entry point the package exports, and only those', () => {
    const exported = Object.keys(pkg.exports)
      .filter((subpath) => subpath !== './package.json')
      .map((subpath) => (subpath === '.' ? 'src/index.ts' : `src/${subpath.slice(2)}.ts`));
    expect([...typedoc.entryPoints].sort()).toEqual(exported.sort());
  });

  it('fails the check on an undocumented export, a leaked type or a broken link', () => {
    expect(typedoc.validation).toEqual({ notExported: true, invalidLink: true, notDocumented: true });
    expect(typedoc.treatValidationWarningsAsErrors).toBe(true);
    expect(pkg.scripts['docs:check']).toBe('typedoc --emit none');
    expect(pkg.scripts.test).toContain('npm run docs:check');
  });
});
