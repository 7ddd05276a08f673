import { describe, expect, it } from 'vitest';
import { ConfigError, createEnvelope, PermanentError } from 'oncemq';
import {
  compileKeySource,
  HASHED_KEY_PREFIX,
  HeaderText,
  NON_KEY,
  normalizeKey,
  parseJsonPath,
  sha256Hex,
} from '../support/internal.js';

const envelope = createEnvelope({
  brokerId: 'host:1234:42',
  topic: 'payments',
  headers: { 'oncemq-key': 'evt-1', 'x-empty': '' },
  body: {},
});

function permanentReason(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof PermanentError) return error.reason;
    throw error;
  }
  return undefined;
}

describe('business key extraction', () => {
  it('reads a header', () => {
    expect(compileKeySource({ header: 'oncemq-key' })(envelope, undefined)).toBe('evt-1');
  });

  it('reads nested JSON paths, array indexes and quoted names', () => {
    const message = { payment: { serialNo: 'P-9' }, items: [{ id: 7 }], 'odd.name': 'x' };
    expect(compileKeySource({ jsonPath: '$.payment.serialNo' })(envelope, message)).toBe('P-9');
    expect(compileKeySource({ jsonPath: 'items[0].id' })(envelope, message)).toBe('7');
    expect(compileKeySource({ jsonPath: "$['odd.name']" })(envelope, message)).toBe('x');
  });

  it('joins several paths into one composite key', () => {
    const extract = compileKeySource({ jsonPath: ['orderId', 'type'] });
    expect(extract(envelope, { orderId: 'o-1', type: 'paid' })).toBe('o-1:paid');
  });

  it('treats a missing, null or empty key as a permanent missing-key error', () => {
    expect(permanentReason(() => compileKeySource({ header: 'absent' })(envelope, undefined))).toBe(
      'missing-key',
    );
    expect(permanentReason(() => compileKeySource({ header: 'x-empty' })(envelope, undefined))).toBe(
      'missing-key',
    );
    expect(permanentReason(() => compileKeySource({ jsonPath: 'id' })(envelope, { id: null }))).toBe(
      'missing-key',
    );
    expect(permanentReason(() => compileKeySource(() => undefined)(envelope, {}))).toBe('missing-key');
  });

  it('makes composite keys unambiguous: a colon inside a part never merges two tuples into one key', () => {
    const extract = compileKeySource({ jsonPath: ['orderId', 'type'] });
    const first = extract(envelope, { orderId: 'o1:paid', type: 'x' });
    const second = extract(envelope, { orderId: 'o1', type: 'paid:x' });
    expect(first).toBe('o1\\:paid:x');
    expect(second).toBe('o1:paid\\:x');
    expect(first).not.toBe(second);
    // A backslash is escaped too, so an escape cannot be forged from inside a part.
    expect(extract(envelope, { orderId: 'o1\\', type: 'x' })).not.toBe(
      extract(envelope, { orderId: 'o1', type: '\\:x' }),
    );
  });

  it('reads integer keys within ±2^53 - 1 exactly and refuses numbers it cannot read exactly', () => {
    const extract = compileKeySource({ jsonPath: 'id' });
    expect(extract(envelope, { id: 9007199254740991 })).toBe('9007199254740991');
    expect(extract(envelope, { id: -42 })).toBe('-42');
    // JSON.parse rounds 9007199254740993 to 9007199254740992: two events would share one key.
    const body = JSON.parse('{"a": 9007199254740993, "b": 9007199254740992}') as { a: number; b: number };
    expect(permanentReason(() => extract(envelope, { id: body.a }))).toBe('invalid-key');
    expect(permanentReason(() => extract(envelope, { id: body.b }))).toBe('invalid-key');
    expect(permanentReason(() => extract(envelope, { id: 1.5 }))).toBe('invalid-key');
    expect(permanentReason(() => extract(envelope, { id: Number.NaN }))).toBe('invalid-key');
    expect(extract(envelope, { id: '9007199254740993' })).toBe('9007199254740993');
  });

  it('says which key sources need the decoded body', () => {
    expect(compileKeySource({ header: 'oncemq-key' }).needsMessage).toBe(false);
    expect(compileKeySource({ brokerId: true }).needsMessage).toBe(false);
    expect(compileKeySource({ jsonPath: 'id' }).needsMessage).toBe(true);
    expect(compileKeySource(() => 'k').needsMessage).toBe(true);
  });

  it('refuses an object where a key should be', () => {
    expect(permanentReason(() => compileKeySource({ jsonPath: 'id' })(envelope, { id: { nested: 1 } }))).toBe(
      'invalid-key',
    );
  });

  it('uses the broker id only when asked to explicitly', () => {
    expect(compileKeySource({ brokerId: true })(envelope, undefined)).toBe('host:1234:42');
  });

  it('rejects malformed key sources at start-up', () => {
    expect(() => compileKeySource({ header: '' })).toThrow(ConfigError);
    expect(() => compileKeySource({ jsonPath: '$.a..b' })).toThrow(ConfigError);
    expect(() => compileKeySource({ jsonPath: '$' })).toThrow(ConfigError);
    expect(() => compileKeySource({ jsonPath: [] })).toThrow(ConfigError);
    expect(() => compileKeySource({} as never)).toThrow(ConfigError);
  });

  it('parses JSON paths into steps', () => {
    expect(parseJsonPath('$.a.b[2]["c d"]')).toEqual(['a', 'b', 2, 'c d']);
    expect(parseJsonPath('eventId')).toEqual(['eventId']);
  });
});

describe('key normalization', () => {
  it('keeps short printable keys as they are, emoji included', () => {
    expect(normalizeKey('order-1:paid')).toBe('order-1:paid');
    expect(normalizeKey('支付-🎉')).toBe('支付-🎉');
  });

  it('stores keys over 200 UTF-8 bytes as a digest, never truncated', () => {
    const long = 'k'.repeat(10_000);
    const sameUpTo200 = `${'k'.repeat(9_999)}j`;
    expect(normalizeKey(long)).toBe(HASHED_KEY_PREFIX + sha256Hex(long));
    expect(normalizeKey(long)).not.toBe(normalizeKey(sameUpTo200));
    expect(normalizeKey('k'.repeat(200))).toBe('k'.repeat(200));
    expect(normalizeKey('é'.repeat(101)).startsWith(HASHED_KEY_PREFIX)).toBe(true);
  });

  it('hashes keys with control characters or NUL bytes', () => {
    expect(normalizeKey('a\u0000b').startsWith(HASHED_KEY_PREFIX)).toBe(true);
    expect(normalizeKey('line\nbreak').startsWith(HASHED_KEY_PREFIX)).toBe(true);
  });

  it('cannot be made to collide with a digest by sending a key that looks like one', () => {
    const digest = normalizeKey('a\u0000b');
    expect(normalizeKey(digest)).not.toBe(digest);
  });

  it('refuses a key with an unpaired surrogate, which UTF-8 cannot carry', () => {
    expect(permanentReason(() => normalizeKey('bad\ud800'))).toBe('invalid-key');
  });

  it('refuses a key holding U+FFFD, the mark a lossy decoder leaves for bytes that are not UTF-8', () => {
    const lossy = new TextDecoder();
    const first = lossy.decode(Uint8Array.of(0x6b, 0xff));
    const second = lossy.decode(Uint8Array.of(0x6b, 0xfe));
    expect(first).toBe(second); // the two keys already are one
    expect(permanentReason(() => normalizeKey(first))).toBe('invalid-key');
    expect(() => normalizeKey(first)).toThrow(/U\+FFFD/);
  });
});

describe('headers no key is read from', () => {
  it('refuses a key header the transport could not read exactly, naming what it was', () => {
    const foreign = createEnvelope({
      brokerId: 'b',
      topic: 't',
      headers: { 'x-flag': 'true' },
      nonKeyHeaders: { 'oncemq-key': 'bytes that are not UTF-8', 'x-flag': 'an AMQP boolean' },
      body: {},
    });
    const byDefault = compileKeySource({ header: 'oncemq-key' });
    expect(permanentReason(() => byDefault(foreign, undefined))).toBe('invalid-key');
    expect(() => byDefault(foreign, undefined)).toThrow(/'oncemq-key' is bytes that are not UTF-8/);
    // A header with a text form that is still no key is refused too, while the handler still sees it.
    expect(permanentReason(() => compileKeySource({ header: 'x-flag' })(foreign, undefined))).toBe(
      'invalid-key',
    );
    expect(foreign.headers['x-flag']).toBe('true');
  });

  it('reads the text headers of a delivery exactly: UTF-8 bytes as text, others and conflicting repeats out', () => {
    const text = new HeaderText();
    text.bytes('a', new TextEncoder().encode('ключ'));
    text.bytes('b', Uint8Array.of(0x6b, 0xff));
    text.text('c', 'one');
    text.text('c', 'one');
    text.text('d', 'one');
    text.text('d', 'two');
    text.text('d', 'one');
    expect(text.headers).toEqual({ a: 'ключ', c: 'one' });
    expect(text.nonKey).toEqual({ b: NON_KEY.notUtf8, d: NON_KEY.repeated });
  });
});
