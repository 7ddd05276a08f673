/**
 * Keeps a dropped connection from ending the process. `rocketmq-client-nodejs` 1.0.8 renews its
 * telemetry stream after both its `error` and its `end`, so two streams can be open at once; when the
 * older one fails, the client's handler releases the newer one with `removeAllListeners()`, and the
 * newer one's own failure then has no `error` listener: Node throws it as an uncaught exception.
 * Every telemetry stream of a guarded client keeps one `error` listener that survives that release
 * and hands the error to oncemq's logger; the client renews the stream as before.
 *
 * The client also renews a stream one second after it failed or ended, even when it was shut down in
 * between: the renewal opens a new gRPC channel that nothing closes, whose stream fails again and is
 * renewed every second, so a process that closed its transport never exits. A guarded client that
 * was shut down gets an inert stream instead, which opens nothing.
 */
import { EventEmitter } from 'node:events';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';

interface StreamLike {
  on(event: 'error', listener: (error: unknown) => void): unknown;
  removeAllListeners(event?: string | symbol): unknown;
}

interface TelemetryClient {
  createTelemetryStream?: (...args: unknown[]) => StreamLike;
  shutdown?: () => Promise<void>;
}

/** A telemetry stream to nowhere: takes writes and ends, emits nothing. */
class InertStream extends EventEmitter {
  write(): boolean {
    return true;
  }

  end(): this {
    return this;
  }
}

/** Wraps `client.createTelemetryStream` so that no stream it makes is ever without an `error` listener. */
export function guardTelemetry<T extends object>(client: T, logger: Logger): T {
  const target = client as TelemetryClient;
  const create = target.createTelemetryStream?.bind(client);
  if (create === undefined) return client;
  const shutdown = target.shutdown?.bind(client);
  let shut = false;
  if (shutdown !== undefined) {
    target.shutdown = (): Promise<void> => {
      shut = true;
      return shutdown();
    };
  }
  target.createTelemetryStream = (...args: unknown[]): StreamLike => {
    if (shut) return new InertStream();
    const stream = create(...args);
    const guard = (error: unknown): void => {
      logger.debug('oncemq: a RocketMQ telemetry stream failed; the client opens another', {
        error: errorText(error),
      });
    };
    stream.on('error', guard);
    const removeAll = stream.removeAllListeners.bind(stream);
    stream.removeAllListeners = (event?: string | symbol): unknown => {
      const result = removeAll(event);
      stream.on('error', guard);
      return result;
    };
    return stream;
  };
  return client;
}
