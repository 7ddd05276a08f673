import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PermanentError } from '../core/errors.js';
import { SILENT_LOGGER } from '../core/logger.js';
import { httpContext } from '../http/http-context.js';
import { createHttpEdge } from '../http/http-edge.js';
import type { HttpVerifier } from '../http/http-request.js';
import { nodeIdempotency } from '../http/node-adapter.js';
import { nodeHttpRequest, readBody } from '../http/node-message.js';
import { webhookPresets } from '../http/webhook-presets.js';
import { injectCommitFailures } from '../testing/commit-failure.js';
import type { EffectChecker } from '../testing/effect-checker.js';
import type { FaultInjector } from '../testing/fault-injector.js';
import { DEMO_RETRY, POINTS_PER_EVENT } from './demo-consumer.js';
import type { DemoStore } from './demo-store.js';
import { WEBHOOKS_SECRET } from './demo-webhooks-sender.js';

/** The ledger group of the receivers' edge rows. */
export const WEBHOOKS_GROUP = 'webhooks';

/** The receivers' route. */
export const WEBHOOKS_PATH = '/webhooks/payments';

/** How long a receiver killed by `crash-after-commit` stays down before it listens again. */
export const RECEIVER_RESTART_MS = 100;

/** The event the demo's sender delivers: a payment that earns its user points. */
export interface PaymentWebhook {
  readonly type: 'payment.succeeded';
  readonly data: { readonly eventId: string; readonly userId: string; readonly amount: number };
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

const textDecoder = new TextDecoder();

/** The event of a delivery's body; a body that is not one can never succeed. */
function paymentOf(body: Uint8Array): PaymentWebhook {
  const event = JSON.parse(textDecoder.decode(body)) as Partial<PaymentWebhook> | null;
  if (event?.type !== 'payment.succeeded' || typeof event.data?.userId !== 'string') {
    throw new PermanentError('invalid', 'not a payment.succeeded event');
  }
  return event as PaymentWebhook;
}

const answer = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};

/**
 * A receiver behind the HTTP edge (a new one each time a receiver starts, as a new process would):
 * the Standard Webhooks preset's `webhook-id` as the key and its HMAC check before the claim, the
 * points written in the claim's transaction, a handler crash injected after the write (rolled back:
 * 500), commits failing after the handler (503).
 */
function edgeListener(store: DemoStore, injector: FaultInjector, checker: EffectChecker): Listener {
  const edge = createHttpEdge<unknown>({
    ledger: injector.enabled('commit-failure') ? injectCommitFailures(store.ledger, injector) : store.ledger,
    group: WEBHOOKS_GROUP,
    principal: () => 'demo-sender',
    key: webhookPresets.standardWebhooks.key,
    verify: webhookPresets.standardWebhooks.verify(WEBHOOKS_SECRET),
    retry: DEMO_RETRY,
    logger: SILENT_LOGGER,
    onOutcome: (outcome) => {
      checker.observe(outcome);
    },
  });
  return nodeIdempotency(edge, async (req: IncomingMessage, res: ServerResponse) => {
    const ctx = httpContext(req);
    const event = paymentOf(ctx.request.body);
    await store.addPoints(ctx.tx, event.data.userId, ctx.idempotencyKey, POINTS_PER_EVENT);
    injector.handlerCrash(ctx.idempotencyKey, ctx.attempt);
    answer(res, 200, { received: ctx.idempotencyKey });
  });
}

/**
 * A receiver without oncemq: it checks the signature as any receiver should, then applies every
 * delivery it gets, each statement on its own; a handler crash after the write answers 500.
 */
function naiveListener(store: DemoStore, injector: FaultInjector, verify: HttpVerifier): Listener {
  return (req, res) => {
    void (async () => {
      try {
        const request = nodeHttpRequest(req, await readBody(req, 1024 * 1024), { native: req });
        try {
          await verify(request);
        } catch {
          answer(res, 401, { error: 'unverified' });
          return;
        }
        const id = request.headers['webhook-id'] ?? '';
        const event = paymentOf(request.body);
        await store.addPointsDirect(event.data.userId, id, POINTS_PER_EVENT);
        injector.handlerCrash(id);
        answer(res, 200, { received: id });
      } catch {
        answer(res, 500, { error: 'handler-failed' });
      }
    })();
  };
}

/** One receiver: a `node:http` server on a loopback port, killed and started again on the same port. */
class Receiver {
  #server: Server | undefined;
  #port = 0;
  #restart: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(private readonly listener: () => Listener) {}

  get url(): string {
    return `http://127.0.0.1:${this.#port}${WEBHOOKS_PATH}`;
  }

  async listen(): Promise<void> {
    const server = createServer({ keepAliveTimeout: 1000 }, this.listener());
    const listen = (port: number): Promise<void> =>
      new Promise((resolve, reject) => {
        server.once('error', reject).listen(port, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      });
    // The port freed by a kill may have been taken meanwhile: then another (the sender reads `url` anew).
    await listen(this.#port).catch(() => listen(0));
    this.#port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  /**
   * Dies as a killed process looks to the sender: every connection reset, the port closed; listens
   * again after {@link RECEIVER_RESTART_MS}. False when it was already down.
   */
  kill(): boolean {
    const server = this.#server;
    if (server === undefined) return false;
    this.#server = undefined;
    server.closeAllConnections();
    server.close();
    this.#restart = setTimeout(() => {
      // One that cannot listen again stays down: the sender's next attempts go to the other receivers.
      if (!this.#closed) this.listen().catch(() => undefined);
    }, RECEIVER_RESTART_MS);
    return true;
  }

  close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#restart);
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return Promise.resolve();
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  }
}

/**
 * The demo's webhook receivers, behind the HTTP edge (or, `naive`, without it), with the faults that
 * hit a receiver after its commit, at the moment it would answer 2xx: `crash-after-commit` kills the
 * receiver (its connections reset, the port closed, started again {@link RECEIVER_RESTART_MS} later),
 * `consumer-ack-loss` drops the response (never sent: the sender times out). Each is decided per 2xx
 * answer of a delivery id.
 */
export class WebhookReceivers {
  readonly #receivers: Receiver[] = [];
  #deliveries = 0;
  #running = 0;
  #kills = 0;

  constructor(
    count: number,
    store: DemoStore,
    private readonly injector: FaultInjector,
    checker: EffectChecker,
    naive: boolean,
  ) {
    const verify = webhookPresets.standardWebhooks.verify(WEBHOOKS_SECRET);
    for (let index = 0; index < count; index++) {
      const receiver: Receiver = new Receiver(() =>
        this.#faulty(
          naive ? naiveListener(store, injector, verify) : edgeListener(store, injector, checker),
          receiver,
        ),
      );
      this.#receivers.push(receiver);
    }
  }

  async start(): Promise<void> {
    for (const receiver of this.#receivers) await receiver.listen();
  }

  /** The receivers' URLs as they are now (a receiver restarted on another port has a new one). */
  urls(): string[] {
    return this.#receivers.map((receiver) => receiver.url);
  }

  /** Requests the receivers got. */
  deliveries(): number {
    return this.#deliveries;
  }

  /** Receivers killed and started again. */
  kills(): number {
    return this.#kills;
  }

  /** Requests still being handled (a receiver killed mid-request finishes its transaction in this process). */
  running(): number {
    return this.#running;
  }

  /** Counts the request, and decides the faults of its answer when the answer is 2xx. */
  #faulty(listener: Listener, receiver: Receiver): Listener {
    return (req, res) => {
      this.#deliveries++;
      this.#running++;
      const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
      let answered = false;
      // The edge's adapter holds the handler's writes back and gives `end` back before its answer.
      res.end = ((...args: unknown[]) => {
        if (!answered) {
          answered = true;
          this.#running--;
          const id = req.headers['webhook-id'];
          if (res.statusCode < 300 && typeof id === 'string') {
            if (this.injector.chance('crash-after-commit', id)) {
              res.socket?.destroy();
              if (receiver.kill()) this.#kills++;
              return res;
            }
            if (this.injector.chance('consumer-ack-loss', id)) return res; // never answered
          }
        }
        return end(...args);
      }) as ServerResponse['end'];
      listener(req, res);
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.#receivers.map((receiver) => receiver.close()));
  }
}
