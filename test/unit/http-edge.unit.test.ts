import { describe, expect, it } from 'vitest';
import { ConfigError, RetryPolicy } from 'oncemq';
import {
  IDEMPOTENCY_KEY_SOURCE,
  InvalidIdempotencyKeyError,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  type HttpEdgeConfig,
  type HttpRequest,
} from 'oncemq/http';
import {
  decodeStoredResponse,
  encodeStoredResponse,
  idempotencyKeyProblem,
  parseIdempotencyKey,
  resolveHttpEdgeConfig,
} from '../support/internal.js';

const request = (headers: Record<string, string>): HttpRequest => ({
  method: 'POST',
  path: '/orders',
  url: '/orders',
  headers,
  body: new Uint8Array(0),
});

describe('reading an Idempotency-Key', () => {
  it('reads the draft’s quoted string, with its escapes, and a bare token as most clients send it', () => {
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toBe(
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    );
    expect(parseIdempotencyKey('"a \\"quoted\\" key \\\\ here"')).toBe('a "quoted" key \\ here');
    expect(parseIdempotencyKey(' order-42 ')).toBe('order-42');
    expect(IDEMPOTENCY_KEY_SOURCE(request({ 'idempotency-key': 'k1' }))).toBe('k1');
    expect(IDEMPOTENCY_KEY_SOURCE(request({}))).toBeUndefined();
  });

  it('refuses two headers joined into a list, a broken quoted string, and what is not visible ASCII', () => {
    for (const value of [
      'a, b',
      '"a", "b"',
      '"unterminated',
      '"bad \\n escape"',
      'cl\u00e9',
      'a\u0001b',
      'a b',
      '',
    ]) {
      expect(() => parseIdempotencyKey(value), value).toThrow(InvalidIdempotencyKeyError);
    }
  });

  it('takes 1 to 255 characters of printable ASCII from any key source', () => {
    expect(idempotencyKeyProblem('k'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH))).toBeUndefined();
    expect(idempotencyKeyProblem('k'.repeat(10_240))).toContain('more than 255');
    expect(idempotencyKeyProblem('')).toBe('the key is empty');
    expect(idempotencyKeyProblem('evt\u0000')).toContain('control character');
    expect(idempotencyKeyProblem('évt')).toContain('outside ASCII');
  });
});

describe('a stored response', () => {
  const stored = new Set(['content-type', 'link']);

  it('comes back with the same status, the stored headers in order, and the same bytes, text or not', () => {
    const bodies = [
      new TextEncoder().encode('{"id":"ü€ 😀"}'),
      new Uint8Array([0, 255, 0xc3, 0x28, 13, 10]),
      new Uint8Array(2000).fill(1), // control characters: JSON escapes would be longer than base64
      new Uint8Array(0),
    ];
    for (const body of bodies) {
      const response = {
        status: 201,
        headers: { 'content-type': 'application/json', link: ['<a>; rel=x', '<b>; rel=y'], 'x-trace': 't' },
        body,
      };
      const text = encodeStoredResponse(response, stored);
      expect(text).toBeDefined();
      expect(text?.length).toBeLessThan(body.byteLength * 2 + 200);
      const back = decodeStoredResponse(text);
      expect(back?.status).toBe(201);
      expect(back?.headers).toEqual({
        'content-type': 'application/json',
        link: ['<a>; rel=x', '<b>; rel=y'],
      });
      expect(Buffer.from(back?.body ?? []).equals(Buffer.from(body))).toBe(true);
    }
  });

  it('is refused past the ledger’s 1 MiB, and text that is not one reads as none', () => {
    const huge = { status: 200, headers: {}, body: new Uint8Array(800 * 1024) };
    expect(encodeStoredResponse(huge, stored)).toBeUndefined();
    expect(decodeStoredResponse('{"result":1}')).toBeUndefined();
    expect(decodeStoredResponse('not json')).toBeUndefined();
    expect(decodeStoredResponse(undefined)).toBeUndefined();
  });
});

describe('the HTTP edge configuration', () => {
  const base = { ledger: undefined as never, principal: () => 'p' } satisfies HttpEdgeConfig<unknown>;
  const refused = (config: Partial<HttpEdgeConfig<unknown>>, field: string): void => {
    let error: unknown;
    try {
      resolveHttpEdgeConfig({ ...base, ...config });
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).field).toBe(field);
  };

  it('has three attempts, 409 at once and the size limits by default', () => {
    const config = resolveHttpEdgeConfig(base);
    expect(config.group).toBe('http');
    expect(config.retry.maxReconsumeTimes + 1).toBe(3);
    expect(config.waitMs).toBe(0);
    expect(config.maxBodyBytes).toBe(1024 * 1024);
    expect(config.maxResponseBytes).toBe(512 * 1024);
    expect(resolveHttpEdgeConfig({ ...base, inFlight: { wait: '2s' } }).waitMs).toBe(2000);
  });

  it('refuses at start-up what cannot work, naming the field', () => {
    refused({ principal: undefined }, 'principal');
    refused({ retry: RetryPolicy.rocketmq({ immediate: 1 }) }, 'retry.immediate');
    refused({ storedHeaders: ['content-length'] }, 'storedHeaders');
    refused({ storedHeaders: ['Content-Type'] }, 'storedHeaders');
    refused({ maxResponseBytes: 1024 * 1024 }, 'maxResponseBytes');
    refused({ maxBodyBytes: -1 }, 'maxBodyBytes');
    refused({ inFlight: 'wait' as never }, 'inFlight');
    refused({ group: 'http/orders' }, 'group');
    refused({ required: 'yes' as never }, 'required');
  });
});
