// What every webhook preset does: tampered, forged, replayed and hostile requests refused as a
// WebhookSignatureError naming its reason, rotated secrets, and the parts a preset is made of.
import { describe, expect, it } from 'vitest';
import { ConfigError, OncemqError } from 'oncemq';
import {
  type HmacScheme,
  hmacVerifier,
  jsonBodyKey,
  webhookHeaderKey,
  webhookPresets,
  WebhookSignatureError,
} from 'oncemq/http';
import {
  github,
  httpRequest,
  SENDERS,
  signedRequest,
  standardWebhooks,
  stripe,
} from '../support/webhook-senders.js';
import { at, outcome, T, verifierOf, withHeaders } from '../support/webhook-presets.js';

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
