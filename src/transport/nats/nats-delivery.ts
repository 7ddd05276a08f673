import type { MsgHdrs } from '@nats-io/transport-node';
import { createEnvelope, readDeliveryCount, type Envelope } from '../../core/envelope.js';
import { errorText, TransportUnavailableError } from '../../core/errors.js';
import { HeaderText } from '../../core/header-text.js';
import { settle, type DeliveryResult, type Settler } from '../settler.js';
import type { NatsSettings } from './nats-config.js';
import type { NatsConfirms } from './nats-confirms.js';
import type { NatsConnectionLike } from './nats-driver.js';
import {
  brokerIdOf,
  INTERNAL_HEADERS,
  REPLAY_GROUP_HEADER,
  RETRY_DUE_HEADER,
  RETRY_PUBLISHED_HEADER,
  RETRY_TOPIC_HEADER,
} from './nats-names.js';
import { repeatedHeaders } from './nats-publisher.js';
import type { NatsSession } from './nats-session.js';
import { checkRetryDue } from '../header-guard.js';

/** What a delivery of one subscription needs to settle itself. */
export interface DeliveryContext {
  readonly group: string;
  readonly settings: NatsSettings;
  readonly connection: NatsConnectionLike;
  readonly session: NatsSession;
  readonly confirms: NatsConfirms;
  /** Acts on each delivery's result (see `NatsSettler`). */
  readonly settler: Settler<NatsDelivery>;
}

/** What a delivery reads of the message it carries (a JetStream message of nats.js has it too). */
export interface DeliveredMessage {
  readonly data: Uint8Array;
  readonly headers?: MsgHdrs | undefined;
  /** The subject its settles go to. */
  readonly reply?: string;
  readonly seq: number;
  readonly time: Date;
  readonly info: { readonly stream: string; readonly deliveryCount: number };
}

/** Where a delivery came from: a topic's stream, or (topic `null`) the group's retry stream. */
export interface DeliverySource {
  readonly stream: string;
  readonly consumer: string;
  readonly topic: string | null;
  /** How often a long handler's keep-alive tells the server it is still working. */
  readonly keepAliveEveryMs: number;
}

/** What a delivery tells the server: `+ACK`, `-NAK` (with a delay), `+TERM`, or `+WPI` (still working). */
export type NatsSettle = 'ack' | 'nak' | 'term' | 'working';

const encoder = new TextEncoder();
const ACK = encoder.encode('+ACK');
const NAK = encoder.encode('-NAK');
const TERM = encoder.encode('+TERM');
const WORKING = encoder.encode('+WPI');

function textHeaders(msg: DeliveredMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of msg.headers?.keys() ?? []) headers[name] = msg.headers?.get(name) ?? '';
  return headers;
}

/**
 * The headers an envelope shows: every header but oncemq's internal ones and the server's `Nats-*`; a
 * name the message carries with several different values is no header text and no business key.
 */
/** oncemq's own headers of a retry copy and the server's `Nats-*`: never the envelope's. */
const internal = (name: string): boolean =>
  INTERNAL_HEADERS.has(name) || name.toLowerCase().startsWith('nats-');

function envelopeHeaders(msg: DeliveredMessage): HeaderText {
  const text = new HeaderText();
  for (const name of msg.headers?.keys() ?? []) {
    if (internal(name)) continue;
    for (const value of msg.headers?.values(name) ?? []) text.text(name, value);
  }
  return text;
}

function epochMs(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{1,16}$/.test(text)) return undefined;
  return Number(text);
}

/**
 * One message handed to this member. Settled at most once, and only in the session it arrived in:
 * after the connection was lost its settle is dropped and the server delivers the copy again
 * after the ack wait (same broker id), which the ledger absorbs.
 */
export class NatsDelivery {
  readonly msg: DeliveredMessage;
  readonly envelope: Envelope;
  readonly generation: number;
  /** Retry copies only: when the copy is due, in milliseconds since the epoch. */
  readonly dueAt: number | undefined;
  readonly #ctx: DeliveryContext;
  /** Headers the message carries with several different values (not in the envelope's), stored again on its copies. */
  readonly repeated: [string, string][] | undefined;
  #settled = false;
  /**
   * Called once the settle's last request (the ack, nak or term) has gone out: the delivery needs
   * its slot no more, while the server's confirm of that request may still be on its way.
   */
  onSent: () => void = () => undefined;

  constructor(ctx: DeliveryContext, source: DeliverySource, msg: DeliveredMessage) {
    this.#ctx = ctx;
    this.msg = msg;
    this.generation = ctx.session.generation;
    const raw = textHeaders(msg);
    const { headers, nonKey } = envelopeHeaders(msg);
    this.repeated = nonKey === undefined ? undefined : repeatedHeaders(msg.headers, headers, internal);
    const due = raw[RETRY_DUE_HEADER];
    // A retry copy's due time out of the bounds oncemq writes is never waited for: it stays in the
    // envelope's headers, where the header guard dead-letters it (a topic stream's is not read at all).
    const badDue = source.topic === null && checkRetryDue(RETRY_DUE_HEADER, due) !== undefined;
    if (badDue && due !== undefined) headers[RETRY_DUE_HEADER] = due;
    this.dueAt = source.topic === null && !badDue ? epochMs(due) : undefined;
    const publishedAt = source.topic === null ? epochMs(raw[RETRY_PUBLISHED_HEADER]) : msg.time.getTime();
    this.envelope = createEnvelope({
      brokerId: brokerIdOf(msg.info.stream, msg.seq),
      topic: source.topic ?? raw[RETRY_TOPIC_HEADER] ?? '',
      headers,
      body: msg.data,
      deliveryCount: readDeliveryCount(headers),
      brokerDeliveryCount: msg.info.deliveryCount,
      nonKeyHeaders: nonKey,
      ...(publishedAt === undefined ? {} : { publishedAt: new Date(publishedAt) }),
      keepAlive: {
        everyMs: source.keepAliveEveryMs,
        extend: () =>
          this.#settled || this.stale
            ? Promise.reject(
                new TransportUnavailableError('the delivery is settled or its connection was lost'),
              )
            : this.send('working'),
      },
    });
  }

  /** The connection was lost since this delivery arrived. */
  get stale(): boolean {
    return this.generation !== this.#ctx.session.generation;
  }

  /** A retry copy that came before it is due goes back for the rest of its delay, unprocessed and uncharged. */
  async postpone(delayMs: number): Promise<void> {
    if (this.#begin()) await this.#guard(() => this.send('nak', delayMs));
  }

  /** The group a replayed dead letter in a topic stream is meant for (the others ack it unprocessed). */
  get replayGroup(): string | undefined {
    return this.msg.headers?.get(REPLAY_GROUP_HEADER) || undefined;
  }

  /** Acks a copy this group does not run (another ordered group's replayed dead letter). */
  async skip(): Promise<void> {
    if (this.#begin()) await this.#guard(() => this.send('ack'));
  }

  /** A copy that arrives while its subscription closes goes back at once, for another member. */
  async giveBack(): Promise<void> {
    if (this.#begin()) await this.#guard(() => this.send('nak', 0));
  }

  /**
   * Acts on the result through the group's settler (see `NatsSettler`): once, and only while the
   * connection it arrived on lasts; a settle the server does not confirm is logged, and the copy may
   * come back after the ack wait.
   */
  async settle(result: DeliveryResult): Promise<void> {
    if (this.#begin()) await this.#guard(() => settle(this.#ctx.settler, this, result));
  }

  #begin(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    if (!this.stale) return true;
    this.#ctx.settings.logger.debug('oncemq: dropped the settle of a delivery from a lost NATS connection', {
      group: this.#ctx.group,
      brokerId: this.envelope.brokerId,
    });
    return false;
  }

  async #guard(work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      this.#ctx.settings.logger.warn(
        'oncemq: a NATS settle was not confirmed; the copy may come back after the ack wait',
        {
          group: this.#ctx.group,
          brokerId: this.envelope.brokerId,
          error: errorText(error),
        },
      );
    }
  }

  /** Sends an ack of the given kind as a request, so that a lost one is known (the settler's last step). */
  async send(kind: NatsSettle, delayMs = 0): Promise<void> {
    // A plain +TERM: servers before 2.10.4 ignore a TERM that carries a reason (the copy stays pending).
    const payload =
      kind === 'ack'
        ? ACK
        : kind === 'term'
          ? TERM
          : kind === 'working'
            ? WORKING
            : delayMs > 0
              ? encoder.encode(`-NAK ${JSON.stringify({ delay: Math.round(delayMs) * 1_000_000 })}`)
              : NAK;
    const reply = this.msg.reply;
    if (reply === undefined || reply === '')
      throw new TransportUnavailableError('the delivery has no reply subject to settle on');
    const confirmed = this.#ctx.confirms.send(reply, payload);
    if (kind !== 'working') this.onSent();
    await confirmed;
  }
}
