import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import type { MsgHdrs } from '@nats-io/transport-node';
import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import type { NatsSettings } from './nats-config.js';
import type { NatsDriver } from './nats-driver.js';
import type { NatsSession } from './nats-session.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Longest pause between two sends of one publish while the server cannot be reached. */
const MAX_RESEND_PAUSE_MS = 1000;

/** One message to store in a stream. */
export interface NatsOutgoing {
  readonly subject: string;
  readonly body: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  /**
   * Headers stored after `headers`, each value appended: a name another producer sent with several
   * values, kept on the copies the transport stores again.
   */
  readonly repeated?: readonly (readonly [string, string])[] | undefined;
  /** `Nats-Msg-Id`: a resend with the same id inside the stream's duplicate window is dropped by the server. */
  readonly msgId: string;
}

/**
 * The headers of a message that are not in `text` because the message carries them with several
 * different values, every value in order: what a copy stores again after its text headers.
 */
export function repeatedHeaders(
  headers: MsgHdrs | undefined,
  text: Readonly<Record<string, string>>,
  skip: (name: string) => boolean = () => false,
): [string, string][] | undefined {
  let repeated: [string, string][] | undefined;
  for (const name of headers?.keys() ?? []) {
    if (text[name] !== undefined || skip(name)) continue;
    for (const value of headers?.values(name) ?? []) (repeated ??= []).push([name, value]);
  }
  return repeated;
}

/** Publishes with the server's confirm (`PubAck`). */
export class NatsPublisher {
  readonly #js: JetStreamClient;
  readonly #driver: NatsDriver;
  readonly #settings: NatsSettings;
  readonly #session: NatsSession;

  constructor(js: JetStreamClient, driver: NatsDriver, settings: NatsSettings, session: NatsSession) {
    this.#js = js;
    this.#driver = driver;
    this.#settings = settings;
    this.#session = session;
  }

  /** One send, confirmed within `requestTimeout`, or a rejection (the outcome is then unknown). */
  async send(message: NatsOutgoing): Promise<PubAck> {
    const headers = this.#driver.headers();
    try {
      for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
      for (const [name, value] of message.repeated ?? []) headers.append(name, value);
    } catch (error) {
      throw new ConfigError('headers', `NATS refuses a header: ${errorText(error)}`, { cause: error });
    }
    await this.#session.ready(this.#settings.requestTimeoutMs);
    return await this.#js.publish(message.subject, message.body, {
      msgID: message.msgId,
      headers,
      timeout: this.#settings.requestTimeoutMs,
    });
  }

  /**
   * Sends until the server confirms, for at most `publishTimeout`: each resend carries the same
   * `Nats-Msg-Id`, so a send that was stored but whose confirm was lost is not stored twice inside
   * the duplicate window. `beforeSend` runs before each send (it may re-check the stream).
   */
  async publish(message: NatsOutgoing, beforeSend: () => Promise<void>): Promise<PubAck> {
    const deadline = Date.now() + this.#settings.publishTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#session.ready(Math.max(1, deadline - Date.now()));
        await beforeSend();
        return await this.send(message);
      } catch (error) {
        if (error instanceof ConfigError || (error as Error | null)?.name === 'ClosedConnectionError')
          throw error;
        const pause = Math.min(MAX_RESEND_PAUSE_MS, 50 * 2 ** attempt);
        if (Date.now() + pause >= deadline) {
          throw new TransportUnavailableError(
            `NATS did not confirm the publish to ${message.subject} within ${this.#settings.publishTimeoutMs}ms (${attempt} sends): ${errorText(error)}`,
            { cause: error },
          );
        }
        this.#settings.logger.debug('oncemq: NATS publish not confirmed; sending again', {
          subject: message.subject,
          attempt,
          error: errorText(error),
        });
        await sleep(pause);
      }
    }
  }
}
