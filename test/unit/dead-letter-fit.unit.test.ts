import { describe, expect, it } from 'vitest';
import { DEAD_LETTER_HEADERS, DeadLetterCutError, DeadLetterTooLargeError, readDeadLetter } from 'oncemq';
import { DEAD_LETTER_SIZE_RESERVE, fitDeadLetter, refuseCutReplay } from '../support/internal.js';

const deadHeaders = {
  'oncemq-key': 'k-1',
  [DEAD_LETTER_HEADERS.group]: 'g',
  [DEAD_LETTER_HEADERS.reason]: 'malformed',
  [DEAD_LETTER_HEADERS.error]: 'not JSON',
  [DEAD_LETTER_HEADERS.topic]: 'orders',
  [DEAD_LETTER_HEADERS.brokerId]: 'S:1',
  [DEAD_LETTER_HEADERS.deadAt]: '2026-12-03T12:00:00.000Z',
};

/** The bytes the rule counts a copy for (name and value plus 8 per header, and the body). */
function bytesOf(copy: { headers: Readonly<Record<string, string>>; body: Uint8Array }): number {
  let bytes = copy.body.length;
  for (const [name, value] of Object.entries(copy.headers)) bytes += name.length + value.length + 8;
  return bytes;
}

describe('fitDeadLetter', () => {
  it('returns a copy that fits the limit as it is', () => {
    const copy = { headers: { ...deadHeaders, 'x-own': 'yes' }, body: new Uint8Array(100) };
    expect(fitDeadLetter(copy, { maxBytes: 64 * 1024 })).toBe(copy);
  });

  it('cuts a body too large to what fits, keeps every header, and says how large the body was', () => {
    const body = new Uint8Array(10_000).fill(1);
    const fitted = fitDeadLetter({ headers: { ...deadHeaders, 'x-own': 'yes' }, body }, { maxBytes: 5_000 });
    expect(fitted.headers).toMatchObject({
      ...deadHeaders,
      'x-own': 'yes',
      [DEAD_LETTER_HEADERS.bodyBytes]: '10000',
    });
    expect(bytesOf(fitted)).toBe(5_000 - DEAD_LETTER_SIZE_RESERVE);
    const letter = readDeadLetter('7', fitted.headers, fitted.body);
    expect(letter.cut).toEqual({ bodyBytes: 10_000, keptBodyBytes: fitted.body.length, droppedHeaders: 0 });
    expect(() => refuseCutReplay(letter)).toThrow(DeadLetterCutError);
    expect(() => refuseCutReplay(letter)).toThrow(
      /dead letter 7 of group g was stored cut .*broker id S:1, key k-1/,
    );
  });

  it("leaves out the original's own headers when they are what is too large, keeping oncemq's", () => {
    const body = new Uint8Array(10);
    const headers = { ...deadHeaders, 'x-large': 'a'.repeat(70_000), 'x-small': 'b' };
    const fitted = fitDeadLetter({ headers, body }, { maxBytes: 1024 * 1024, maxHeaderBytes: 65_536 });
    expect(fitted.headers).toEqual({
      ...deadHeaders,
      [DEAD_LETTER_HEADERS.bodyBytes]: '10',
      [DEAD_LETTER_HEADERS.droppedHeaders]: '2',
    });
    expect(fitted.body).toEqual(body);
    expect(readDeadLetter('1', fitted.headers, fitted.body).cut?.droppedHeaders).toBe(2);
  });

  it('throws when not even oncemq’s headers fit: the transport leaves the original unacked', () => {
    const copy = { headers: deadHeaders, body: new Uint8Array(10) };
    expect(() => fitDeadLetter(copy, { maxBytes: DEAD_LETTER_SIZE_RESERVE + 100 })).toThrow(
      DeadLetterTooLargeError,
    );
  });

  it('lists a letter stored as it was without cut, and replays it', () => {
    const letter = readDeadLetter('2', deadHeaders, new Uint8Array(3));
    expect(letter.cut).toBeUndefined();
    expect(() => refuseCutReplay(letter)).not.toThrow();
  });
});
