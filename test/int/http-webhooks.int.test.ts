// Webhook presets plugged into the HTTP edge on a real node:http server over SQLite, deliveries signed
// by the senders' own libraries: a retried delivery applies its effect once and is answered the first
// response; a forged one is 401 and claims nothing; a signed one without a delivery id is 400.
import { sign as githubSign } from '@octokit/webhooks-methods';
import Stripe from 'stripe';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Ledger } from 'oncemq';
import { webhookPresets, type HttpEdge, type SignedWebhookPreset } from 'oncemq/http';
import {
  HTTP_DATABASES,
  post,
  startServer,
  testEdge,
  type HttpDb,
  type TestServer,
} from '../support/http.js';

const sqlite = HTTP_DATABASES.find((factory) => factory.name === 'sqlite');
const stripe = new Stripe('sk_test_not_used_for_any_call');

interface Sender {
  readonly name: string;
  readonly preset: SignedWebhookPreset;
  readonly secret: string;
  /** The body of delivery `id`, and the headers its sender's library signs it with. */
  deliver(id: string, secret: string): Promise<{ body: string; headers: Record<string, string> }>;
}

const SENDERS: readonly Sender[] = [
  {
    name: 'github',
    preset: webhookPresets.github,
    secret: 'github webhook secret',
    async deliver(id, secret) {
      const body = JSON.stringify({ action: 'opened', number: 7 });
      return {
        body,
        headers: { 'x-github-delivery': id, 'x-hub-signature-256': await githubSign(secret, body) },
      };
    },
  },
  {
    name: 'stripe',
    preset: webhookPresets.stripe,
    secret: 'whsec_edge_test_secret',
    deliver(id, secret) {
      const body = JSON.stringify({ id, object: 'event', type: 'invoice.paid' });
      const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret });
      return Promise.resolve({ body, headers: { 'stripe-signature': header } });
    },
  },
];

describe.each(SENDERS)('the $name preset behind the HTTP edge', (sender) => {
  let db: HttpDb;
  let ledger: Ledger;
  let edge: HttpEdge<unknown>;
  let server: TestServer;
  let url: string;
  let runs = 0;

  beforeEach(async () => {
    db = (await sqlite?.open()) as HttpDb;
    ledger = db.ledger();
    edge = testEdge(ledger, {
      principal: () => sender.name,
      key: sender.preset.key,
      verify: sender.preset.verify(sender.secret),
    });
    runs = 0;
    server = await startServer('node', edge, async (ctx) => {
      runs++;
      await db.insert(ctx.tx, ctx.idempotencyKey, sender.name);
      return { status: 200, json: { received: ctx.idempotencyKey } };
    });
    url = `${server.url}/orders/hooks`;
  });

  afterEach(async () => {
    await server.close();
    edge.close();
    await db.close();
  });

  it('a delivery the sender retries, signed anew each time, applies its effect once and gets the first answer back', async () => {
    const first = await sender.deliver('evt_1001', sender.secret);
    const answered = await post(url, first.body, first.headers);
    expect(answered.status).toBe(200);
    const retry = await sender.deliver('evt_1001', sender.secret);
    const replayed = await post(url, retry.body, retry.headers);
    expect(replayed.status).toBe(200);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.bytes.equals(answered.bytes)).toBe(true);
    expect(runs).toBe(1);
    expect(await db.count('evt_1001')).toBe(1);
  });

  it('a forged delivery is 401 and claims nothing, so the genuine one that follows runs', async () => {
    const forged = await sender.deliver('evt_2002', 'a guessed secret');
    const refused = await post(url, forged.body, forged.headers);
    expect(refused.status).toBe(401);
    expect(refused.json).toMatchObject({ code: 'unverified' });
    expect((await ledger.list({ group: 'http' })).length).toBe(0);
    const genuine = await sender.deliver('evt_2002', sender.secret);
    expect((await post(url, genuine.body, genuine.headers)).status).toBe(200);
    expect(runs).toBe(1);
  });

  it('a signed delivery without its delivery id is 400', async () => {
    const delivery = await sender.deliver('', sender.secret);
    const headers = { ...delivery.headers };
    delete headers['x-github-delivery'];
    const answered = await post(url, delivery.body, headers);
    expect(answered.status).toBe(400);
    expect(answered.json).toMatchObject({ code: 'missing-key' });
    expect(runs).toBe(0);
  });
});
