/**
 * Keeps a dropped connection from ending the process, and a closed client from keeping it alive.
 *
 * `rocketmq-client-nodejs` 1.0.8 releases a failed or ended telemetry stream with
 * `removeAllListeners()` and renews it a second later; the released stream's call can still fail
 * after that, and a failure with no `error` listener is thrown by Node as an uncaught exception.
 * Every telemetry stream of a guarded client keeps one `error` listener that survives the release
 * and hands the error to oncemq's logger. The release itself must stay whole: a stream that kept the
 * client's `error` and `end` listeners would be renewed twice per failure, and the streams of a client
 * would double with every dropped connection until the process does nothing else.
 *
 * The client also renews a stream one second after it failed or ended, even when it was shut down in
 * between: the renewal opens a new gRPC channel that nothing closes, whose stream fails again and is
 * renewed every second, so a process that closed its transport never exits. A guarded client that
 * was shut down gets an inert stream instead, which opens nothing. A shutdown whose goodbye to the
 * proxy fails (the proxy is unreachable) throws before the client closes its channels and their idle
 * check timer; a guarded client closes them then too.
 */
import { EventEmitter } from 'node:events';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';

interface StreamLike {
  on(event: 'error', listener: (error: unknown) => void): unknown;
  listeners(event: 'error'): unknown[];
  removeAllListeners(...event: [(string | symbol)?]): unknown;
}

interface TelemetryClient {
  createTelemetryStream?: (...args: unknown[]) => StreamLike;
  shutdown?: () => Promise<void>;
  getRpcClientManager?: () => { close(): void };
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
    target.shutdown = async (): Promise<void> => {
      shut = true;
      try {
        await shutdown();
      } catch (error) {
        target.getRpcClientManager?.().close();
        throw error;
      }
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
    // `removeAllListeners()` and `removeAllListeners(undefined)` differ: the second removes the
    // listeners of no event. The arguments go on as they came.
    stream.removeAllListeners = (...event: [(string | symbol)?]): unknown => {
      const result = removeAll(...event);
      if (!stream.listeners('error').includes(guard)) stream.on('error', guard);
      return result;
    };
    return stream;
  };
  return client;
}
