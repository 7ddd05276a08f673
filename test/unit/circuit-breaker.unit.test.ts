import { describe, expect, it } from 'vitest';
import { CircuitBreaker } from '../support/internal.js';

describe('CircuitBreaker', () => {
  it('lets calls through until a failure, then none until the retry interval has passed', () => {
    let now = 0;
    const breaker = new CircuitBreaker(1_000, () => now);
    expect(breaker.allows()).toBe(true);
    breaker.failure();
    expect(breaker.isOpen).toBe(true);
    now = 999;
    expect(breaker.allows()).toBe(false);
    now = 1_000;
    expect(breaker.allows()).toBe(true);
  });

  it('lets one probe through when half-open and closes on its success', () => {
    let now = 0;
    const breaker = new CircuitBreaker(10, () => now);
    breaker.failure();
    now = 10;
    expect(breaker.allows()).toBe(true);
    expect(breaker.allows()).toBe(false);
    breaker.success();
    expect(breaker.allows()).toBe(true);
    expect(breaker.allows()).toBe(true);
  });

  it('opens again for a full interval when the probe fails, counting only closed-to-open changes', () => {
    let now = 0;
    const breaker = new CircuitBreaker(10, () => now);
    breaker.failure();
    now = 10;
    expect(breaker.allows()).toBe(true);
    breaker.failure();
    now = 19;
    expect(breaker.allows()).toBe(false);
    expect(breaker.timesOpened).toBe(1);
  });
});
