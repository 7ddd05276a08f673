// The Standard Webhooks preset against the spec's published test vector: tampered, partial and rotated
// signatures, stale timestamps, missing metadata and the secrets it takes.
import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { type HttpRequest, type HttpVerifier, webhookPresets, type WebhookSecrets } from 'oncemq/http';
import { httpRequest } from '../support/webhook-senders.js';
import { at, outcome, withHeaders } from '../support/webhook-presets.js';

describe('the Standard Webhooks preset, against the spec’s published test vector', () => {
  // libraries/*/webhook_test: TestWebhookSign in the standard-webhooks repository.
  const vector = {
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    timestamp: 1614265330,
    body: '{"test": 2432232314}',
    signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  };
  const request = (headers: Record<string, string | undefined> = {}, body = vector.body): HttpRequest =>
    withHeaders(
      httpRequest(
        {
          'webhook-id': vector.id,
          'webhook-timestamp': String(vector.timestamp),
          'webhook-signature': vector.signature,
        },
        body,
      ),
      headers,
    );
  const verify = (secrets: WebhookSecrets = vector.secret, seconds = vector.timestamp): HttpVerifier =>
    webhookPresets.standardWebhooks.verify(secrets, { now: at(seconds) });

  it('accepts the vector, with the whsec_ prefix or without, and reads webhook-id as the key', async () => {
    expect(await outcome(verify(), request())).toBe('accepted');
    expect(await outcome(verify(vector.secret.slice('whsec_'.length)), request())).toBe('accepted');
    expect(webhookPresets.standardWebhooks.key(request())).toBe(vector.id);
  });

  it('refuses the vector with its body, id or timestamp changed: all three are signed', async () => {
    expect(await outcome(verify(), request({}, '{"test": 2432232315}'))).toBe('bad-signature');
    expect(await outcome(verify(), request({ 'webhook-id': 'msg_other' }))).toBe('bad-signature');
    expect(await outcome(verify(), request({ 'webhook-timestamp': String(vector.timestamp + 1) }))).toBe(
      'bad-signature',
    );
  });

  it('refuses the reference libraries’ invalid and partial signatures', async () => {
    expect(
      await outcome(
        verify(),
        request({ 'webhook-signature': 'v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=' }),
      ),
    ).toBe('bad-signature');
    expect(await outcome(verify(), request({ 'webhook-signature': 'v1,' }))).toBe('malformed');
    expect(await outcome(verify(), request({ 'webhook-signature': 'v1,dawfeoifkpqwoekfpqoekf' }))).toBe(
      'malformed',
    );
  });

  it('accepts one valid v1 among several signatures and other versions, as while a secret is rotated', async () => {
    const signatures = [
      'v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=',
      'v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=',
      vector.signature,
      'v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=',
    ].join(' ');
    expect(await outcome(verify(), request({ 'webhook-signature': signatures }))).toBe('accepted');
  });

  it('refuses a timestamp more than 5 minutes off either way, after the signature holds', async () => {
    expect(await outcome(verify(vector.secret, vector.timestamp + 300), request())).toBe('accepted');
    expect(await outcome(verify(vector.secret, vector.timestamp - 300), request())).toBe('accepted');
    expect(await outcome(verify(vector.secret, vector.timestamp + 301), request())).toBe('stale-timestamp');
    expect(await outcome(verify(vector.secret, vector.timestamp - 301), request())).toBe('stale-timestamp');
    // A forged signature is a forgery whatever its timestamp.
    expect(await outcome(verify(vector.secret, vector.timestamp + 3600), request({}, '{}'))).toBe(
      'bad-signature',
    );
  });

  it('takes a configured tolerance instead of 5 minutes', async () => {
    const verifyOneMinute = webhookPresets.standardWebhooks.verify(vector.secret, {
      tolerance: '1m',
      now: at(vector.timestamp + 61),
    });
    expect(await outcome(verifyOneMinute, request())).toBe('stale-timestamp');
  });

  it('tells a missing signature from missing or unreadable signed metadata', async () => {
    expect(await outcome(verify(), request({ 'webhook-signature': undefined }))).toBe('missing-signature');
    expect(
      await outcome(
        verify(),
        request({
          'webhook-signature':
            'v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==',
        }),
      ),
    ).toBe('missing-signature');
    expect(await outcome(verify(), request({ 'webhook-id': undefined }))).toBe('malformed');
    expect(await outcome(verify(), request({ 'webhook-timestamp': undefined }))).toBe('malformed');
    expect(await outcome(verify(), request({ 'webhook-timestamp': 'hello' }))).toBe('malformed');
    expect(await outcome(verify(), request({ 'webhook-timestamp': '01614265330' }))).toBe('malformed');
    expect(await outcome(verify(), request({ 'webhook-timestamp': '1614265330.5' }))).toBe('malformed');
  });

  it('refuses at start-up a secret that is empty or not base64', () => {
    for (const secret of [
      '',
      'whsec_',
      'whsec_not base64!',
      'whsec_abc',
      ' whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    ]) {
      expect(() => webhookPresets.standardWebhooks.verify(secret), secret).toThrow(ConfigError);
    }
    expect(() => webhookPresets.standardWebhooks.verify([])).toThrow(/no secret given/);
    expect(() => webhookPresets.standardWebhooks.verify(new Uint8Array())).toThrow(ConfigError);
  });

  it('takes the key’s raw bytes as a secret', async () => {
    const raw = Buffer.from(vector.secret.slice('whsec_'.length), 'base64');
    expect(await outcome(verify([new Uint8Array(raw)]), request())).toBe('accepted');
  });
});
