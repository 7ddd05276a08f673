import { describe, expect, it, vi } from 'vitest';
import type * as oncemq from 'oncemq';
import { ConfigError, LedgerUnavailableError, OncemqError, PermanentError, RetryPolicy } from 'oncemq';

/** A second copy of the package's classes, as an app that both imports and requires oncemq has. */
async function otherCopy(): Promise<typeof oncemq> {
  vi.resetModules();
  return import('oncemq');
}

describe('instanceof between two copies of the package', () => {
  it('matches an error of the other copy to the class of the same name and its bases', async () => {
    const other = await otherCopy();
    expect(other.PermanentError).not.toBe(PermanentError);
    const error = new other.PermanentError('invalid', 'no points for mallory');
    expect(error instanceof PermanentError).toBe(true);
    expect(error instanceof OncemqError).toBe(true);
    expect(error instanceof Error).toBe(true);
    expect(error instanceof ConfigError).toBe(false);
    expect(new PermanentError('invalid', 'x') instanceof other.PermanentError).toBe(true);
    expect(new other.LedgerUnavailableError('down') instanceof LedgerUnavailableError).toBe(true);
  });

  it('does not match a class of the same name that is not oncemq’s, nor plain values', () => {
    const foreign = class PermanentError extends Error {};
    expect(foreign.name).toBe(PermanentError.name);
    expect(new foreign('x') instanceof PermanentError).toBe(false);
    for (const value of [null, undefined, 'PermanentError', 1, {}, Object.create(null), new Error('x')]) {
      expect(value instanceof OncemqError).toBe(false);
    }
  });

  it('takes a retry policy of the other copy as a retry policy', async () => {
    const other = await otherCopy();
    const policy = new other.RetryPolicy({ name: 'short', delays: ['5s'] });
    expect(policy instanceof RetryPolicy).toBe(true);
    expect({} instanceof RetryPolicy).toBe(false);
  });
});
