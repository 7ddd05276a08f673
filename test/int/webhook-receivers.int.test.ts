// Webhook receivers over a real node:http server on an ephemeral port and a real SQLite ledger, with
// deliveries signed by the senders' own libraries (stripe, @octokit/webhooks-methods,
// standardwebhooks; Shopify from its documented recipe). The glue between server and ledger is the
// least a middleware does — verify, read the key, claim it with the effect in one transaction — so
// that what is proven here is the presets': a signed delivery's retries make one effect, and an
// unsigned, forged, late or keyless one never claims anything.
import { createHmac } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { sign as githubSign } from '@octokit/webhooks-methods';
import Database from 'better-sqlite3';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteLedger } from 'oncemq/sqlite';
import { normalizeKey, sha256Hex } from '../support/internal.js';
import {
  type HttpRequest,
  type HttpVerifier,
  type SignedWebhookPreset,
  webhookPresets,
  WebhookSignatureError,
} from 'oncemq/http';
import { scratchDir } from '../support/points.js';

const SECRETS = {
  stripe: 'whsec_int_current_1f0c2e',
  github: 'github webhook secret, current',
  standardWebhooks: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  shopify: 'shopify client secret, current',
} as const;
const OLD_SECRETS = {
  stripe: 'whsec_int_previous_77aa01',
  github: 'github webhook secret, previous',
  standardWebhooks: 'whsec_cHJldmlvdXMgc3RhbmRhcmQga2V5IQ==',
  shopify: 'shopify client secret, previous',
} as const;
/** Secrets the receiver does not have: what a forger signs with. */
const GUESSED_SECRETS = {
  stripe: 'whsec_guessed',
  github: 'guessed',
  standardWebhooks: 'whsec_Z3Vlc3NlZCBzdGFuZGFyZCBrZXkh',
  shopify: 'guessed',
} as const;
type SenderName = keyof typeof SECRETS;

interface Route {
  readonly preset: SignedWebhookPreset;
  readonly verify: HttpVerifier;
}

interface Answer {
  readonly status: number;
  readonly body: { readonly outcome?: string; readonly reason?: string };
}

const stripeClient = new Stripe('sk_test_not_used_for_any_call');
const now = (): number => Math.floor(Date.now() / 1000);

/** The headers each sender's own code signs `body` with. */
const signers: Record<
  SenderName,
  (id: string, body: string, secret: string, timestamp: number) => Promise<Record<string, string>>
> = {
  stripe: (_id, body, secret, timestamp) =>
    Promise.resolve({
      'stripe-signature': stripeClient.webhooks.generateTestHeaderString({
        payload: body,
        secret,
        timestamp,
      }),
    }),
  github: async (id, body, secret) => ({
    'x-github-delivery': id,
    'x-hub-signature-256': await githubSign(secret, body),
  }),
  standardWebhooks: (id, body, secret, timestamp) =>
    Promise.resolve({
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': new StandardWebhook(secret).sign(id, new Date(timestamp * 1000), body),
    }),
  // https://shopify.dev/docs/apps/build/webhooks/verify-deliveries: base64 HMAC-SHA256 of the raw body.
  shopify: (id, body, secret) =>
    Promise.resolve({
      'x-shopify-webhook-id': id,
      'x-shopify-hmac-sha256': createHmac('sha256', secret).update(body).digest('base64'),
    }),
};

const bodyOf = (sender: SenderName, id: string): string =>
  sender === 'stripe'
    ? JSON.stringify({ id, object: 'event', type: 'invoice.paid' })
    : JSON.stringify({ event: id, n: 1 });

/** The request as an adapter hands it over: lower-case names, a header sent twice joined with ", ". */
function toHttpRequest(req: IncomingMessage, body: Buffer): HttpRequest {
  const headers: Record<string, string> = {};
  for (const [name, values] of Object.entries(req.headersDistinct)) {
    if (values !== undefined) headers[name] = values.join(', ');
  }
  const url = req.url ?? '/';
  return { method: req.method ?? 'GET', path: url.split('?')[0] ?? url, url, headers, body };
}

describe('webhook receivers on node:http over a SQLite ledger', () => {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'webhooks.db');
  const app = new Database(path);
  app.exec('CREATE TABLE effects (sender TEXT NOT NULL, key TEXT NOT NULL)');
  const ledger = new SqliteLedger({ database: path });
  const routes = new Map<string, Route>(
    (Object.keys(SECRETS) as SenderName[]).map((name) => [
      `/${name}`,
      {
        preset: webhookPresets[name],
        verify: webhookPresets[name].verify([SECRETS[name], OLD_SECRETS[name]]),
      },
    ]),
  );
  let server: Server;
  let port = 0;

  async function receive(req: IncomingMessage): Promise<{ status: number; body: Answer['body'] }> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request = toHttpRequest(req, Buffer.concat(chunks));
    const route = routes.get(request.path);
    if (route === undefined) return { status: 404, body: {} };
    try {
      await route.verify(request);
    } catch (error) {
      if (error instanceof WebhookSignatureError) return { status: 401, body: { reason: error.reason } };
      throw error;
    }
    const raw = route.preset.key(request);
    if (raw === undefined) return { status: 400, body: { reason: 'missing-key' } };
    const result = await ledger.transaction(
      {
        group: route.preset.name,
        key: normalizeKey(raw),
        fingerprint: sha256Hex(request.body),
        brokerId: raw,
        topic: request.path,
        leaseMs: 30_000,
      },
      (tx) => {
        tx.prepare('INSERT INTO effects (sender, key) VALUES (?, ?)').run(route.preset.name, raw);
        return null;
      },
    );
    return { status: result.status === 'conflict' ? 422 : 200, body: { outcome: result.status } };
  }

  beforeAll(async () => {
    await ledger.init();
    server = createServer((req, res) => {
      receive(req).then(
        ({ status, body }) =>
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await ledger.close();
    app.close();
    scratch.remove();
  });

  /** Posts `body` to the sender's route; a header given as an array goes out repeated. */
  function post(
    sender: SenderName,
    headers: Record<string, string | string[]>,
    body: string | Buffer,
  ): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path: `/${sender}`,
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text || '{}') as Answer['body'] });
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  const effects = (sender: SenderName, key: string): number =>
    (
      app
        .prepare('SELECT COUNT(*) AS n FROM effects WHERE sender = ? AND key = ?')
        .get(webhookPresets[sender].name, key) as {
        n: number;
      }
    ).n;
  const claimed = async (sender: SenderName, key: string): Promise<boolean> =>
    (await ledger.get(webhookPresets[sender].name, key)) !== undefined;

  describe.each(Object.keys(SECRETS) as SenderName[])('%s', (sender) => {
    const id = (what: string): string => (sender === 'stripe' ? `evt_${what}` : `${sender}-${what}`);

    it('applies a signed delivery once however often it is retried, concurrent copies included', async () => {
      const key = id('retried');
      const body = bodyOf(sender, key);
      const headers = await signers[sender](key, body, SECRETS[sender], now());
      const first = await post(sender, headers, body);
      const copies = await Promise.all(Array.from({ length: 8 }, () => post(sender, headers, body)));
      expect(first).toEqual({ status: 200, body: { outcome: 'acquired' } });
      expect(copies.map((answer) => answer.body.outcome)).toEqual(Array(8).fill('duplicate'));
      expect(effects(sender, key)).toBe(1);
    });

    it('accepts a delivery signed with the old secret during a rotation', async () => {
      const key = id('old-secret');
      const body = bodyOf(sender, key);
      const answer = await post(sender, await signers[sender](key, body, OLD_SECRETS[sender], now()), body);
      expect(answer.status).toBe(200);
      expect(effects(sender, key)).toBe(1);
    });

    it('answers 401 with the reason to unsigned, forged and tampered deliveries, and claims nothing', async () => {
      const key = id('refused');
      const body = bodyOf(sender, key);
      const signed = await signers[sender](key, body, SECRETS[sender], now());
      const forged = await signers[sender](key, body, GUESSED_SECRETS[sender], now());
      const signatureHeader = Object.keys(signed).find((name) => /signature|hmac/.test(name)) ?? '';
      const unsigned = Object.fromEntries(
        Object.entries(signed).filter(([name]) => name !== signatureHeader),
      );
      expect(await post(sender, unsigned, body)).toEqual({
        status: 401,
        body: { reason: 'missing-signature' },
      });
      expect(await post(sender, forged, body)).toEqual({ status: 401, body: { reason: 'bad-signature' } });
      expect(await post(sender, signed, `${body} `)).toEqual({
        status: 401,
        body: { reason: 'bad-signature' },
      });
      expect(
        await post(sender, { ...signed, [signatureHeader]: [signed[signatureHeader] ?? '', 'x'] }, body),
      ).toEqual({
        status: 401,
        body: { reason: 'malformed' },
      });
      expect(await claimed(sender, key)).toBe(false);
      expect(effects(sender, key)).toBe(0);
    });

    it.skipIf(sender === 'github' || sender === 'shopify')(
      'answers 401 stale-timestamp to a genuine delivery replayed an hour later, and claims nothing',
      async () => {
        const key = id('replayed');
        const body = bodyOf(sender, key);
        const answer = await post(
          sender,
          await signers[sender](key, body, SECRETS[sender], now() - 3600),
          body,
        );
        expect(answer).toEqual({ status: 401, body: { reason: 'stale-timestamp' } });
        expect(await claimed(sender, key)).toBe(false);
      },
    );
  });

  it('answers 400 to a signed Stripe delivery whose body holds no event id, and claims nothing', async () => {
    for (const body of ['{"object":"event"}', '{"id":', '']) {
      const headers = await signers.stripe('', body, SECRETS.stripe, now());
      expect(await post('stripe', headers, body)).toEqual({ status: 400, body: { reason: 'missing-key' } });
    }
    expect((app.prepare("SELECT COUNT(*) AS n FROM effects WHERE key = ''").get() as { n: number }).n).toBe(
      0,
    );
  });

  it('answers 400 to a signed GitHub delivery whose X-GitHub-Delivery is sent twice: two ids are no key', async () => {
    const body = bodyOf('github', 'twice');
    const headers = await signers.github('github-twice-a', body, SECRETS.github, now());
    const answer = await post(
      'github',
      { ...headers, 'x-github-delivery': ['github-twice-a', 'github-twice-b'] },
      body,
    );
    expect(answer).toEqual({ status: 400, body: { reason: 'missing-key' } });
    expect(await claimed('github', 'github-twice-a, github-twice-b')).toBe(false);
  });
});
