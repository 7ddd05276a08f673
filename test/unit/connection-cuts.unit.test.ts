import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConnectionCuts, cutGaps } from '../support/internal.js';

const draw = (seed: string, everyMs: number, count: number): number[] => {
  const gap = cutGaps(seed, everyMs);
  return Array.from({ length: count }, () => gap());
};

describe('cutGaps', () => {
  it('varies the gap between half and one and a half times the period, around the period', () => {
    const gaps = draw('1', 1500, 400);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(750);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(2250);
    // no fixed period to lock in step with a broker's timers: the gaps spread over most of the range
    expect(Math.max(...gaps) - Math.min(...gaps)).toBeGreaterThan(1200);
    const mean = gaps.reduce((sum, gap) => sum + gap, 0) / gaps.length;
    expect(mean).toBeGreaterThan(1400);
    expect(mean).toBeLessThan(1600);
  });

  it('draws the same gaps from the same seed, others from another', () => {
    expect(draw('7', 1500, 20)).toEqual(draw('7', 1500, 20));
    expect(draw('7', 1500, 20)).not.toEqual(draw('8', 1500, 20));
  });
});

describe('ConnectionCuts', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('cuts at the drawn gaps until stopped, counting the cuts that met a connection', () => {
    vi.useFakeTimers();
    let open = true;
    let calls = 0;
    const route = {
      drop: (): number => {
        calls++;
        return open ? 2 : 0;
      },
    };
    const gaps = draw('3', 1000, 3);
    const cuts = new ConnectionCuts(route, '3', 1000).start();
    vi.advanceTimersByTime((gaps[0] ?? 0) - 1);
    expect(calls).toBe(0);
    vi.advanceTimersByTime(1);
    expect(calls).toBe(1);
    vi.advanceTimersByTime(gaps[1] ?? 0);
    expect(calls).toBe(2);
    open = false;
    cuts.drop(); // one outside the schedule, with nothing to cut
    expect(calls).toBe(3);
    expect(cuts.drops).toBe(2);
    cuts.stop();
    vi.advanceTimersByTime(10_000);
    expect(calls).toBe(3);
  });
});
