import { connect } from 'node:net';

/** A service an integration suite needs, reached through a URL from an environment variable or a default. */
export interface ServiceSpec {
  /** Environment variable that overrides the URL (`ONCEMQ_POSTGRES_URL`). */
  readonly variable: string;
  /** The machine's loopback default. */
  readonly defaultUrl: string;
}

export interface Service {
  readonly url: string;
  readonly available: boolean;
  /** Why the suite is skipped, naming the variable to set. */
  readonly reason: string;
}

function reachable(host: string, port: number, timeoutMs = 1500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * Finds a service for an integration suite. Unreachable outside CI: the suite skips with a message
 * naming the variable to set. Under `CI=true` an unreachable service is a failure, not a skip.
 */
export async function findService(spec: ServiceSpec): Promise<Service> {
  const url = process.env[spec.variable] ?? spec.defaultUrl;
  const parsed = new URL(url);
  const port = Number(parsed.port);
  const available = await reachable(parsed.hostname.replace(/^\[|\]$/g, ''), port);
  const reason = `${url} is not reachable; start the service or set ${spec.variable}`;
  if (!available && process.env.CI === 'true') {
    throw new Error(`CI=true and ${reason}`);
  }
  if (!available) console.warn(`skipping: ${reason}`);
  return { url, available, reason };
}
