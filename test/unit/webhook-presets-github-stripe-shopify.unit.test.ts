// The GitHub, Stripe and Shopify presets: their published test values, their headers and where each
// reads the key.
import { describe, expect, it } from 'vitest';
import { type HttpRequest, type HttpVerifier, webhookPresets } from 'oncemq/http';
import { httpRequest, shopify, signedRequest, stripe } from '../support/webhook-senders.js';
import { at, outcome, T, verifierOf, withHeaders } from '../support/webhook-presets.js';

describe('the GitHub preset, against GitHub’s published test values', () => {
  // docs.github.com, "Validating webhook deliveries" — "Testing the webhook payload validation".
  const signature = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';
  const request = (headers: Record<string, string | undefined> = {}, body = 'Hello, World!'): HttpRequest =>
    withHeaders(httpRequest({ 'x-hub-signature-256': signature, 'x-github-delivery': 'd-1' }, body), headers);
  const verify = webhookPresets.github.verify("It's a Secret to Everybody");

  it('accepts the published signature and refuses it over another body', async () => {
    expect(await outcome(verify, request())).toBe('accepted');
    expect(await outcome(verify, request({}, 'Hello, World?'))).toBe('bad-signature');
    expect(
      await outcome(
        verify,
        request({ 'x-hub-signature-256': signature.toUpperCase().replace('SHA256=', 'sha256=') }),
      ),
    ).toBe('accepted');
  });

  it('refuses a missing header, another algorithm, a cut digest and a header sent twice', async () => {
    expect(await outcome(verify, request({ 'x-hub-signature-256': undefined }))).toBe('missing-signature');
    expect(await outcome(verify, request({ 'x-hub-signature-256': '' }))).toBe('missing-signature');
    expect(await outcome(verify, request({ 'x-hub-signature-256': 'sha1=0123' }))).toBe('malformed');
    expect(await outcome(verify, request({ 'x-hub-signature-256': signature.slice(0, -2) }))).toBe(
      'malformed',
    );
    expect(await outcome(verify, request({ 'x-hub-signature-256': `${signature}, ${signature}` }))).toBe(
      'malformed',
    );
  });

  it('has no timestamp, so a tolerance is refused at start-up', () => {
    expect(() => webhookPresets.github.verify('s', { tolerance: '5m' })).toThrow(/github signs no timestamp/);
  });

  it('reads X-GitHub-Delivery as the key, and no key from an empty or repeated one', () => {
    expect(webhookPresets.github.key(request())).toBe('d-1');
    expect(webhookPresets.github.key(request({ 'x-github-delivery': undefined }))).toBeUndefined();
    expect(webhookPresets.github.key(request({ 'x-github-delivery': '' }))).toBeUndefined();
    expect(webhookPresets.github.key(request({ 'x-github-delivery': 'd-1, d-2' }))).toBeUndefined();
  });
});

describe('the Stripe preset', () => {
  const verify = (secrets: string | readonly string[] = stripe.secret, seconds = T): HttpVerifier =>
    webhookPresets.stripe.verify(secrets, { now: at(seconds) });
  const signed = signedRequest(stripe, 'evt_1', T);
  const header = signed.headers['stripe-signature'] ?? '';
  const v1 = header.slice(header.indexOf(',') + 1);

  it('accepts any v1 that matches, as while Stripe rolls a secret, and ignores other schemes', async () => {
    const old = signedRequest(stripe, 'evt_1', T, stripe.oldSecret).headers['stripe-signature'] ?? '';
    const both = `t=${T},${old.slice(old.indexOf(',') + 1)},${v1},v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39`;
    expect(await outcome(verify(), withHeaders(signed, { 'stripe-signature': both }))).toBe('accepted');
  });

  it('refuses a timestamp more than 300 s old, or as far ahead', async () => {
    expect(await outcome(verify(stripe.secret, T + 300), signed)).toBe('accepted');
    expect(await outcome(verify(stripe.secret, T + 301), signed)).toBe('stale-timestamp');
    expect(await outcome(verify(stripe.secret, T - 301), signed)).toBe('stale-timestamp');
  });

  it('refuses a header without t, with two t (the header sent twice), or without v1', async () => {
    expect(await outcome(verify(), withHeaders(signed, { 'stripe-signature': v1 }))).toBe('malformed');
    expect(await outcome(verify(), withHeaders(signed, { 'stripe-signature': `${header}, ${header}` }))).toBe(
      'malformed',
    );
    expect(await outcome(verify(), withHeaders(signed, { 'stripe-signature': `t=${T}` }))).toBe(
      'missing-signature',
    );
    expect(
      await outcome(verify(), withHeaders(signed, { 'stripe-signature': `t=${T},v0=${v1.slice(3)}` })),
    ).toBe('missing-signature');
    expect(await outcome(verify(), withHeaders(signed, { 'stripe-signature': `t=12e8,${v1}` }))).toBe(
      'malformed',
    );
  });

  it('reads the event id from the JSON body, and no key from a body without one — never a throw', () => {
    expect(webhookPresets.stripe.key(signed)).toBe('evt_1');
    const key = (body: string | Uint8Array): string | undefined =>
      webhookPresets.stripe.key(httpRequest({}, body));
    expect(key('{"id":"evt_2","object":"event"}')).toBe('evt_2');
    expect(key('')).toBeUndefined();
    expect(key('{"id":')).toBeUndefined();
    expect(key('{"object":"event"}')).toBeUndefined();
    expect(key('{"id":""}')).toBeUndefined();
    expect(key('{"id":null}')).toBeUndefined();
    expect(key('{"id":{"nested":"evt_3"}}')).toBeUndefined();
    expect(key('{"id":1.5}')).toBeUndefined();
    expect(key('{"id":9007199254740993}')).toBeUndefined();
    expect(key('["evt_4"]')).toBeUndefined();
    expect(key('null')).toBeUndefined();
    expect(key(new Uint8Array([0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]))).toBeUndefined(); // {"id":"\xff"}
    expect(key('['.repeat(200_000) + ']'.repeat(200_000))).toBeUndefined();
  });
});

describe('the Shopify preset', () => {
  const signed = signedRequest(shopify, 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043', T);

  it('reads X-Shopify-Webhook-Id as the key and refuses a digest that is not base64 of 32 bytes', async () => {
    const verify = verifierOf(shopify);
    expect(webhookPresets.shopify.key(signed)).toBe('b54557e4-bdd9-4b37-8a5f-bf7d70bcd043');
    expect(await outcome(verify, signed)).toBe('accepted');
    const digest = signed.headers['x-shopify-hmac-sha256'] ?? '';
    expect(await outcome(verify, withHeaders(signed, { 'x-shopify-hmac-sha256': digest.slice(0, -1) }))).toBe(
      'malformed',
    );
    expect(
      await outcome(
        verify,
        withHeaders(signed, { 'x-shopify-hmac-sha256': Buffer.from(digest, 'base64').toString('hex') }),
      ),
    ).toBe('malformed');
  });
});
