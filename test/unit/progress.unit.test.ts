import { describe, expect, it } from 'vitest';
import { progressReporter } from '../support/internal.js';

const stream = (isTTY: boolean) => {
  const written: string[] = [];
  return { written, isTTY, write: (text: string) => written.push(text) };
};

describe('progressReporter', () => {
  it('writes one line each time another tenth is done when the stream is not a terminal', () => {
    const out = stream(false);
    const progress = progressReporter('consumed', out);
    for (const done of [0, 5, 12, 12, 13, 55, 99, 100]) progress.update(done, 100);
    progress.end();
    expect(out.written).toEqual([
      'consumed 12/100 (12%)\n',
      'consumed 55/100 (55%)\n',
      'consumed 99/100 (99%)\n',
      'consumed 100/100 (100%)\n',
    ]);
  });

  it('redraws one bar in place on a terminal and ends it with a newline', () => {
    const out = stream(true);
    const progress = progressReporter('consumed', out);
    progress.update(50, 100);
    progress.update(100, 100);
    progress.end();
    expect(out.written).toHaveLength(3);
    expect(out.written[0]).toMatch(/^\r {2}\[#{15}\.{15}\] {2}50% {2}50\/100 consumed$/);
    expect(out.written[2]).toBe('\n');
  });
});
