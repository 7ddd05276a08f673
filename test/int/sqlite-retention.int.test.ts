import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, RetryPolicy, startRetention, type RetentionProgress } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { pointsRequest, scratchDir } from '../support/points.js';

describe('startRetention on a SQLite ledger (no maintenance lock)', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let now: number;
  let ledger: SqliteLedger;

  beforeEach(async () => {
    scratch = scratchDir();
    now = 1_700_000_000_000;
    ledger = new SqliteLedger({ database: join(scratch.dir, 'ledger.db'), clock: () => now });
    await ledger.init();
  });

  afterEach(async () => {
    await ledger.close();
    scratch.remove();
  });

  it('deletes finished rows older than olderThan batch by batch, reporting progress, and keeps live claims', async () => {
    for (let i = 0; i < 25; i++) await ledger.transaction(pointsRequest(`old-${i}`), () => null);
    await ledger.claim(pointsRequest('stuck', 1));
    now += 3 * 86_400_000;
    await ledger.transaction(pointsRequest('recent'), () => null);
    const reports: RetentionProgress[] = [];
    const retention = startRetention(ledger, {
      every: '1h',
      olderThan: '2d',
      batchSize: 10,
      retry: RetryPolicy.none(),
      replayMargin: '1d',
      clock: () => now,
      onProgress: (progress) => reports.push(progress),
    });
    const last = await retention.runOnce();
    await retention.stop();
    expect(last).toMatchObject({
      run: 1,
      deleted: 25,
      batches: 3,
      done: true,
      skipped: false,
      totalDeleted: 25,
    });
    expect(reports.map((r) => r.deleted)).toEqual([10, 20, 25]);
    expect(await ledger.get('points', 'stuck')).toMatchObject({ status: 'PROCESSING' });
    expect(await ledger.get('points', 'recent')).toMatchObject({ status: 'SUCCESS' });
    expect(await retention.runOnce()).toMatchObject({ deleted: 0 });
  });

  it('refuses a retention shorter than the redelivery horizon, naming the retention and the fix', () => {
    const error = (() => {
      try {
        startRetention(ledger, { olderThan: '1d', retry: RetryPolicy.rocketmq(), replayMargin: '1d' });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(
      /retention 1d is shorter than the redelivery horizon 1d4h45m40s/,
    );
  });

  it('refuses a batch size that is not a positive integer', () => {
    expect(() => startRetention(ledger, { batchSize: 0, retry: RetryPolicy.none() })).toThrow(/batchSize/);
  });
});
