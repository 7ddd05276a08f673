import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type HttpRequest, WebhookSignatureError } from 'oncemq/http';
import { acmePreset } from './acme-webhook-preset.js';

const secret = 'acme endpoint secret';
const T = 1_700_000_000;

function acmeRequest(id: string, body: string, timestamp = T, key = secret): HttpRequest {
  const digest = createHmac('sha256', key).update(`${timestamp}.${body}`).digest('hex');
  return {
    method: 'POST',
    path: '/webhooks/acme',
    url: '/webhooks/acme',
    headers: { 'acme-delivery': id, 'acme-signature': `${timestamp}:${digest}` },
    body: Buffer.from(body),
  };
}

const reason = async (request: HttpRequest, seconds = T): Promise<string> => {
  try {
    await acmePreset.verify(secret, { now: () => seconds * 1000 })(request);
    return 'accepted';
  } catch (error) {
    return error instanceof WebhookSignatureError ? error.reason : String(error);
  }
};

describe('the Acme preset example', () => {
  it('reads the delivery id and accepts what Acme signed', async () => {
    const request = acmeRequest('acme-1', '{"paid":true}');
    expect(acmePreset.key(request)).toBe('acme-1');
    expect(await reason(request)).toBe('accepted');
  });

  it('refuses a forged, an unsigned, a malformed and a late request with the built-in reasons', async () => {
    expect(await reason(acmeRequest('acme-1', '{"paid":true}', T, 'guessed'))).toBe('bad-signature');
    expect(await reason({ ...acmeRequest('acme-1', '{}'), headers: { 'acme-delivery': 'acme-1' } })).toBe(
      'missing-signature',
    );
    expect(
      await reason({ ...acmeRequest('acme-1', '{}'), headers: { 'acme-signature': `${T}:aa:bb` } }),
    ).toBe('malformed');
    expect(await reason(acmeRequest('acme-1', '{}'), T + 301)).toBe('stale-timestamp');
  });

  it('is the code docs/webhooks.md shows', () => {
    const source = readFileSync(new URL('./acme-webhook-preset.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/webhooks.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
