import { createHmac } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultInjector } from '../testing/fault-injector.js';

/**
 * The demo sender's signing secret, as a Standard Webhooks sender shows it (`whsec_` + base64 of the
 * key). The receivers verify with `webhookPresets.standardWebhooks.verify(secret)`.
 */
export const WEBHOOKS_SECRET = 'whsec_b25jZW1xIGRlbW8gd2ViaG9vayBzZWNyZXQ=';

/** How the demo sender retries: a Standard Webhooks sender's schedule, scaled down so a run takes seconds. */
export const WEBHOOKS_SENDER = Object.freeze({
  /** Deliveries in flight at once (the sender's workers). */
  concurrency: 16,
  /** An attempt without an answer by then is given up on and retried (a dropped response ends here). */
  timeoutMs: 400,
  /** Attempts of one delivery before the sender gives up on it (the event is then lost). */
  attempts: 12,
  /** Wait before the second attempt, doubled before each next one, up to {@link maxBackoffMs}. */
  firstBackoffMs: 20,
  maxBackoffMs: 640,
});

/** One event the sender delivers: its `webhook-id` (the same on every retry and resend) and its body. */
export interface WebhookDelivery {
  readonly id: string;
  readonly body: string;
}

/** What the sender saw, in all. */
export interface SenderCounts {
  /** Requests sent, first attempts, retries and resends together. */
  requests: number;
  /** Retries after no answer within the timeout. */
  timeouts: number;
  /** Retries after a 5xx answer. */
  serverErrors: number;
  /** Retries after a 409 (the delivery still running on another request). */
  inFlight: number;
  /** Retries after a reset or refused connection (a receiver that died). */
  connectionErrors: number;
  /** Deliveries sent again after their 2xx (the `producer-ack-loss` fault). */
  resent: number;
  /** Deliveries given up: out of attempts, or answered a 4xx other than 409 and 429. */
  gaveUp: number;
}

/** The `webhook-signature` of a delivery: `v1,` + base64 HMAC-SHA256 of `<id>.<timestamp>.<body>` (the spec's scheme). */
export function standardWebhooksSignature(
  secret: string,
  id: string,
  timestamp: number,
  body: string,
): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const digest = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64');
  return `v1,${digest}`;
}

type Attempt =
  | 'delivered'
  | 'refused'
  | keyof Pick<SenderCounts, 'timeouts' | 'serverErrors' | 'inFlight' | 'connectionErrors'>;

/**
 * The webhook sender of the demo: delivers each event to one of the receivers (the next one on each
 * attempt, as a load balancer would), signed anew at each attempt; retries on a timeout, a 5xx, a 409
 * and a dropped connection with a doubling backoff, at most `attempts` times; and, when the injector's
 * `producer-ack-loss` says so after a 2xx, sends the delivery again as a new one (a sender that lost
 * its record of the success, or a redelivery asked for by hand).
 */
export class WebhookSender {
  readonly counts: SenderCounts = {
    requests: 0,
    timeouts: 0,
    serverErrors: 0,
    inFlight: 0,
    connectionErrors: 0,
    resent: 0,
    gaveUp: 0,
  };

  /** Kept-alive connections to the receivers, as a sender's HTTP client pools them. */
  readonly #agent = new Agent({ keepAlive: true, maxSockets: WEBHOOKS_SENDER.concurrency });

  constructor(
    private readonly receivers: () => readonly string[],
    private readonly injector: FaultInjector,
  ) {}

  /** Delivers every event, {@link WEBHOOKS_SENDER}.concurrency at a time; `onDone` after each. */
  async deliverAll(deliveries: readonly WebhookDelivery[], onDone: () => void): Promise<void> {
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let index = next++; index < deliveries.length; index = next++) {
        await this.#deliver(deliveries[index] as WebhookDelivery, index);
        onDone();
      }
    };
    await Promise.all(Array.from({ length: WEBHOOKS_SENDER.concurrency }, worker));
  }

  async #deliver(delivery: WebhookDelivery, index: number): Promise<void> {
    let tries = 0;
    for (;;) {
      if (!(await this.#untilAnswered(delivery, index, () => tries++))) return;
      if (!this.injector.chance('producer-ack-loss', delivery.id)) return;
      this.counts.resent++;
    }
  }

  /** Sends until a definite answer: true for a 2xx, false when given up. */
  async #untilAnswered(delivery: WebhookDelivery, index: number, nextTry: () => number): Promise<boolean> {
    for (let attempt = 1; attempt <= WEBHOOKS_SENDER.attempts; attempt++) {
      const receivers = this.receivers();
      const url = receivers[(index + nextTry()) % receivers.length] as string;
      const result = await this.#send(url, delivery);
      if (result === 'delivered') return true;
      if (result === 'refused') break;
      this.counts[result]++;
      const backoff = WEBHOOKS_SENDER.firstBackoffMs * 2 ** (attempt - 1);
      await sleep(Math.min(WEBHOOKS_SENDER.maxBackoffMs, backoff));
    }
    this.counts.gaveUp++;
    return false;
  }

  async #send(url: string, delivery: WebhookDelivery): Promise<Attempt> {
    this.counts.requests++;
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      'content-type': 'application/json',
      'webhook-id': delivery.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': standardWebhooksSignature(WEBHOOKS_SECRET, delivery.id, timestamp, delivery.body),
    };
    const status = await new Promise<number | 'timeouts' | 'connectionErrors'>((resolve) => {
      const request = httpRequest(url, { method: 'POST', headers, agent: this.#agent }, (response) => {
        response.resume();
        response.on('end', () => {
          resolve(response.statusCode ?? 0);
        });
        response.on('error', () => {
          resolve('connectionErrors');
        });
      });
      const timer = setTimeout(() => {
        resolve('timeouts');
        request.destroy();
      }, WEBHOOKS_SENDER.timeoutMs);
      request.on('error', () => {
        resolve('connectionErrors');
      });
      request.on('close', () => {
        clearTimeout(timer);
      });
      request.end(delivery.body);
    });
    if (typeof status !== 'number') return status;
    if (status >= 200 && status < 300) return 'delivered';
    if (status >= 500) return 'serverErrors';
    if (status === 409 || status === 429) return 'inFlight';
    return 'refused';
  }

  /** Closes the sender's idle connections. */
  close(): void {
    this.#agent.destroy();
  }
}
