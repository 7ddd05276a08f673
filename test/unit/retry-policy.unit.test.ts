import { describe, expect, it } from 'vitest';
import { ConfigError, RetryPolicy } from 'oncemq';
import { checkRetention, formatDuration, parseDuration } from '../support/internal.js';

describe('durations', () => {
  it('parses compound units and formats them back', () => {
    expect(parseDuration('4h46m', 'x')).toBe((4 * 60 + 46) * 60_000);
    expect(parseDuration('1d2h3m4s5ms', 'x')).toBe(93_784_005);
    expect(parseDuration(250, 'x')).toBe(250);
    expect(formatDuration(17_140_000)).toBe('4h45m40s');
    expect(formatDuration(0)).toBe('0ms');
  });

  it('names the field of a malformed duration', () => {
    expect(() => parseDuration('10 minutes', 'retention')).toThrow(/retention/);
    expect(() => parseDuration(-1, 'lease')).toThrow(ConfigError);
    expect(() => parseDuration('', 'lease')).toThrow(ConfigError);
  });
});

describe('the RocketMQ retry policy', () => {
  const policy = RetryPolicy.rocketmq();

  it('waits level n + 3 for reconsume n: 10s, 30s, 1m … 2h', () => {
    expect(policy.delaysMs.slice(0, 4)).toEqual([10_000, 30_000, 60_000, 120_000]);
    expect(policy.delaysMs.at(-1)).toBe(2 * 3_600_000);
    expect(policy.maxReconsumeTimes).toBe(16);
  });

  it('has a redelivery horizon of 4h45m40s', () => {
    expect(formatDuration(policy.horizonMs)).toBe('4h45m40s');
  });

  it('dead-letters after the 16th reconsume', () => {
    expect(policy.decide(0)).toEqual({ action: 'retry', delayMs: 10_000, reconsumeTimes: 0 });
    expect(policy.decide(15)).toEqual({ action: 'retry', delayMs: 7_200_000, reconsumeTimes: 15 });
    expect(policy.decide(16)).toEqual({ action: 'dead-letter', reconsumeTimes: 16 });
  });

  it('takes a custom schedule and caps exponential backoff', () => {
    expect(new RetryPolicy({ delays: ['1s', 500] }).delaysMs).toEqual([1000, 500]);
    expect(RetryPolicy.exponential({ base: '1s', max: '5s', count: 5 }).delaysMs).toEqual([
      1000, 2000, 4000, 5000, 5000,
    ]);
    expect(RetryPolicy.none().decide(0).action).toBe('dead-letter');
  });

  it('refuses a negative immediate retry count', () => {
    expect(() => new RetryPolicy({ immediate: -1 })).toThrow(/retry.immediate/);
  });
});

describe('retention check', () => {
  it('refuses a retention shorter than the horizon, naming both durations', () => {
    expect(() =>
      checkRetention({
        retentionMs: 3_600_000,
        policy: RetryPolicy.rocketmq(),
        replayMarginMs: 0,
        what: 'ledger',
      }),
    ).toThrow(/ledger retention 1h is shorter than the redelivery horizon 4h45m40s/);
  });

  it('adds the replay margin to the horizon', () => {
    const policy = RetryPolicy.rocketmq();
    expect(() =>
      checkRetention({ retentionMs: policy.horizonMs, policy, replayMarginMs: 0, what: 'ledger' }),
    ).not.toThrow();
    expect(() =>
      checkRetention({ retentionMs: policy.horizonMs, policy, replayMarginMs: 1, what: 'ledger' }),
    ).toThrow(ConfigError);
  });
});

describe('the bounds transports read foreign headers by', () => {
  it('refuses a delay longer than 7 days: a retry due time later than that is a foreign header', () => {
    expect(() => new RetryPolicy({ delays: ['1s', '8d'] })).toThrow(/retry\.delays\[1\]: at most 7d/);
    expect(new RetryPolicy({ delays: ['7d'] }).delaysMs).toEqual([7 * 86_400_000]);
  });

  it('refuses 10,000 delayed retries or more: a larger delivery count is a foreign header', () => {
    expect(() => new RetryPolicy({ delays: Array.from({ length: 10_000 }, () => 1) })).toThrow(
      /at most 9999 delayed retries/,
    );
    expect(new RetryPolicy({ delays: Array.from({ length: 9_999 }, () => 1) }).maxReconsumeTimes).toBe(9_999);
  });
});
