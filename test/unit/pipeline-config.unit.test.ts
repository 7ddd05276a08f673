import { describe, expect, it } from 'vitest';
import { ConfigError, createPipeline, DEFAULT_LEDGER_CAPABILITIES, type Ledger } from 'oncemq';
import { sqlIdentifier, validateGroup } from '../support/internal.js';

/** A ledger that only declares capabilities: configuration is checked before any I/O. */
function declared(capabilities: Partial<Ledger['capabilities']>, retentionMs = 7 * 86_400_000): Ledger {
  const fail = (): never => {
    throw new Error('no I/O expected');
  };
  return {
    name: 'declared',
    capabilities: { ...DEFAULT_LEDGER_CAPABILITIES, ...capabilities },
    retentionMs,
    dialect: undefined,
    init: fail,
    transaction: fail,
    recordFailure: fail,
    claim: fail,
    renew: fail,
    complete: fail,
    fail,
    release: fail,
    transactionMany: fail,
    get: fail,
    list: fail,
    reset: fail,
    tryMaintenanceLock: fail,
    purge: fail,
    close: fail,
  };
}

const handler = (): undefined => undefined;

describe('pipeline configuration', () => {
  it('defaults to transactional mode on a transactional ledger and leased otherwise', () => {
    expect(createPipeline({ ledger: declared({ transactional: true }), group: 'g', handler }).mode).toBe(
      'transactional',
    );
    expect(createPipeline({ ledger: declared({ transactional: false }), group: 'g', handler }).mode).toBe(
      'leased',
    );
  });

  it('refuses transactional mode on a ledger that cannot share a transaction', () => {
    expect(() =>
      createPipeline({
        ledger: declared({ transactional: false }),
        group: 'g',
        mode: 'transactional',
        handler,
      }),
    ).toThrow(/cannot share a transaction/);
  });

  it('refuses a ledger retention shorter than the redelivery horizon at start-up', () => {
    expect(() => createPipeline({ ledger: declared({}, 3_600_000), group: 'g', handler })).toThrow(
      /retention 1h is shorter than the redelivery horizon 1d4h45m40s/,
    );
  });

  it('refuses a renewal interval that would let the lease lapse', () => {
    expect(() =>
      createPipeline({ ledger: declared({}), group: 'g', handler, lease: '10s', renewEvery: '10s' }),
    ).toThrow(/renewEvery/);
    // Just under the lease leaves no time for a renewal to land.
    expect(() =>
      createPipeline({ ledger: declared({}), group: 'g', handler, lease: '300ms', renewEvery: '299ms' }),
    ).toThrow(/a third of the lease \(100ms\)/);
    // Half the lease leaves a late renewal too little time: it was the accepted maximum once.
    expect(() =>
      createPipeline({ ledger: declared({}), group: 'g', handler, lease: '300ms', renewEvery: '150ms' }),
    ).toThrow(/renewEvery: .*renew every 100ms or lengthen the lease/);
    expect(() =>
      createPipeline({ ledger: declared({}), group: 'g', handler, lease: '300ms', renewEvery: '101ms' }),
    ).toThrow(/renewEvery/);
    expect(
      createPipeline({ ledger: declared({}), group: 'g', handler, lease: '300ms', renewEvery: '100ms' }).mode,
    ).toBe('leased');
  });

  it('refuses hostile group names and SQL identifiers', () => {
    expect(() => validateGroup('points; DROP TABLE x')).toThrow(ConfigError);
    expect(() => validateGroup('')).toThrow(ConfigError);
    expect(validateGroup('%RETRY%points')).toBe('%RETRY%points');
    expect(() => sqlIdentifier('x; DROP TABLE y', 'table')).toThrow(/not a safe SQL identifier/);
    expect(() => sqlIdentifier('a"b', 'table')).toThrow(ConfigError);
    expect(sqlIdentifier('oncemq_ledger', 'table')).toBe('oncemq_ledger');
  });

  it('refuses an unknown decoder', () => {
    expect(() =>
      createPipeline({ ledger: declared({}), group: 'g', handler, decode: 'xml' as never }),
    ).toThrow(/decode/);
  });
});
