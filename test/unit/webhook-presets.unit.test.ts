// The webhook presets' keys and signature checks: the senders' published test vectors, tampered and
// forged requests, stale timestamps, rotated secrets, missing and hostile headers. Every refusal is a
// WebhookSignatureError with the reason the middleware reports; every missing key is `undefined`.
import { describe, expect, it } from 'vitest';
import { ConfigError, OncemqError } from 'oncemq';
import {
  type HmacScheme,
  hmacVerifier,
  type HttpRequest,
  type HttpVerifier,
  jsonBodyKey,
  webhookHeaderKey,
  webhookPresets,
  type WebhookSecrets,
  WebhookSignatureError,
  type WebhookSignatureReason,
} from 'oncemq/http';
import {
  github,
  httpRequest,
  SENDERS,
  type Sender,
  shopify,
  signedRequest,
  standardWebhooks,
  stripe,
} from '../support/webhook-senders.js';

const T = 1_700_000_000; // seconds
const at = (seconds: number) => () => seconds * 1000;

/** The reason `verify` refused `request` with, or `'accepted'`. */
async function outcome(
  verify: HttpVerifier,
  request: HttpRequest,
): Promise<WebhookSignatureReason | 'accepted'> {
  try {
    await verify(request);
    return 'accepted';
  } catch (error) {
    if (error instanceof WebhookSignatureError) return error.reason;
    throw error;
  }
}

const verifierOf = (
  sender: Sender,
  secrets: string | readonly string[] = sender.secret,
  now = at(T),
): HttpVerifier => sender.preset.verify(secrets, sender.timestamped ? { now } : {});

const withHeaders = (request: HttpRequest, headers: Record<string, string | undefined>): HttpRequest => ({
  ...request,
  headers: { ...request.headers, ...headers },
});

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

describe.each(SENDERS)('the $name preset, like every preset', (sender) => {
  const signed = signedRequest(sender, 'delivery-1', T);

  it('accepts a delivery the sender signed, and reads its key', async () => {
    expect(await outcome(verifierOf(sender), signed)).toBe('accepted');
    expect(sender.preset.key(signed)).toBe('delivery-1');
    expect(sender.preset.docs).toMatch(/^https:\/\//);
  });

  it('refuses the delivery with a byte of its body changed', async () => {
    const body = Buffer.from(signed.body);
    const at = body.length - 2;
    body.writeUInt8(body.readUInt8(at) ^ 1, at);
    expect(await outcome(verifierOf(sender), { ...signed, body })).toBe('bad-signature');
  });

  it('refuses an unsigned delivery and one signed with another secret', async () => {
    expect(
      await outcome(verifierOf(sender), withHeaders(signed, { [sender.signatureHeader]: undefined })),
    ).toBe('missing-signature');
    expect(await outcome(verifierOf(sender, 'whsec_c29tZW9uZSBlbHNlJ3Mgc2VjcmV0IQ=='), signed)).toBe(
      'bad-signature',
    );
  });

  it('accepts the old secret’s signature while both secrets are configured, and not after', async () => {
    const old = signedRequest(sender, 'delivery-2', T, sender.oldSecret);
    expect(await outcome(verifierOf(sender, [sender.secret, sender.oldSecret]), old)).toBe('accepted');
    expect(await outcome(verifierOf(sender, [sender.secret, sender.oldSecret]), signed)).toBe('accepted');
    expect(await outcome(verifierOf(sender, [sender.secret]), old)).toBe('bad-signature');
  });

  it.skipIf(!sender.timestamped)('refuses a genuine delivery replayed an hour later', async () => {
    expect(await outcome(verifierOf(sender, sender.secret, at(T + 3600)), signed)).toBe('stale-timestamp');
  });

  it('refuses hostile signature headers — huge, with control characters, sent twice — as a WebhookSignatureError', async () => {
    const value = signed.headers[sender.signatureHeader] ?? '';
    const hostile = [
      'A'.repeat(1_000_000),
      value + 'A'.repeat(1_000_000),
      'v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= '.repeat(20_000),
      `${value}\u0000`,
      `\r\n${value}`,
      `${value}\u0000garbage`,
      `${value}, ${value}x`,
      '=,=,,t=,v1=,v1,, ',
    ];
    for (const header of hostile) {
      const reason = await outcome(
        verifierOf(sender),
        withHeaders(signed, { [sender.signatureHeader]: header }),
      );
      expect(reason, JSON.stringify(header.slice(0, 40))).not.toBe('accepted');
    }
  });

  it('refuses at start-up a secret with white space around it, and an empty one', () => {
    expect(() => sender.preset.verify(`${sender.secret}\n`)).toThrow(/white space/);
    expect(() => sender.preset.verify('')).toThrow(ConfigError);
  });
});

describe('WebhookSignatureError', () => {
  it('is an OncemqError naming sender, reason and header, and never the secret or a digest', async () => {
    const signed = signedRequest(github, 'd-1', T);
    let error: unknown;
    try {
      await webhookPresets.github.verify('another secret')(signed);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(OncemqError);
    expect(error).toBeInstanceOf(WebhookSignatureError);
    expect(error).toMatchObject({
      name: 'WebhookSignatureError',
      code: 'webhook-signature',
      sender: 'github',
      reason: 'bad-signature',
    });
    const message = (error as Error).message;
    expect(message).toMatch(/^github webhook refused \(bad-signature\)/);
    expect(message).not.toContain('another secret');
    expect(message).not.toContain((signed.headers['x-hub-signature-256'] ?? '').slice(7, 20));
    const unsigned = await outcome(webhookPresets.github.verify('s'), httpRequest({}, '{}'));
    expect(unsigned).toBe('missing-signature');
  });

  it('names the stale timestamp’s distance and the tolerance', () => {
    expect(() =>
      verifierOf(
        standardWebhooks,
        standardWebhooks.secret,
        at(T + 7200),
      )(signedRequest(standardWebhooks, 'm', T)),
    ).toThrow(/is 2h from now, past the tolerance of 5m/);
  });
});

describe('the parts a preset is made of', () => {
  const scheme: HmacScheme = {
    sender: 'acme',
    encoding: 'hex',
    timestamped: true,
    secretFormat: 'text',
    read: () => ({ signatures: [] }),
    signed: (request) => [request.body],
  };

  it('refuses at start-up a scheme, a tolerance or a secret list that cannot work', () => {
    expect(() => hmacVerifier({ ...scheme, sender: '' })).toThrow(/scheme.sender/);
    expect(() => hmacVerifier({ ...scheme, encoding: 'base32' as 'hex' })).toThrow(/scheme.encoding/);
    expect(() => hmacVerifier({ ...scheme, secretFormat: 'pem' as 'text' })).toThrow(/scheme.secretFormat/);
    expect(() => stripe.preset.verify(stripe.secret, { tolerance: 0 })).toThrow(
      /stripe.tolerance: must be longer than 0/,
    );
    expect(() => stripe.preset.verify(stripe.secret, { tolerance: '5 minutes' })).toThrow(ConfigError);
    expect(() => stripe.preset.verify([stripe.secret, ''])).toThrow(/stripe.secret\[1\]/);
  });

  it('refuses a timestamped request when the clock answers NaN, rather than accept it', async () => {
    const verify = standardWebhooks.preset.verify(standardWebhooks.secret, { now: () => Number.NaN });
    expect(await outcome(verify, signedRequest(standardWebhooks, 'm', T))).toBe('stale-timestamp');
  });

  it('refuses at start-up a header name or a JSON path that cannot work', () => {
    expect(() => webhookHeaderKey('X Delivery')).toThrow(ConfigError);
    expect(() => webhookHeaderKey('')).toThrow(ConfigError);
    expect(() => jsonBodyKey('$')).toThrow(ConfigError);
    expect(() => jsonBodyKey('data..id')).toThrow(ConfigError);
  });

  it('reads a header by any case of its name, and a nested body path', () => {
    expect(webhookHeaderKey('X-Acme-Delivery')(httpRequest({ 'x-acme-delivery': 'a-1' }, ''))).toBe('a-1');
    const body = '{"data":{"object":{"id":"in_1","seq":42}},"list":[{"id":"x"}]}';
    expect(jsonBodyKey('$.data.object.id')(httpRequest({}, body))).toBe('in_1');
    expect(jsonBodyKey('data.object.seq')(httpRequest({}, body))).toBe('42');
    expect(jsonBodyKey('$.list[0].id')(httpRequest({}, body))).toBe('x');
    expect(jsonBodyKey('$.list[1].id')(httpRequest({}, body))).toBeUndefined();
    expect(jsonBodyKey('constructor')(httpRequest({}, body))).toBeUndefined();
  });
});
