import { createServer, type Server } from 'node:http';
import type * as PrometheusExporterModule from '@opentelemetry/exporter-prometheus';
import type * as SdkMetricsModule from '@opentelemetry/sdk-metrics';
import { ConfigError, errorText } from '../core/errors.js';
import { loadOtelApi } from './otel-api.js';
import type { MeterProviderLike } from './otel-like.js';

/** Input of {@link servePrometheus}. */
export interface PrometheusConfig {
  /** Port of the HTTP server; 0 takes a free one (read it from `url`). @default 9464 */
  readonly port?: number;
  /** Interface the server listens on. @default '127.0.0.1' */
  readonly host?: string;
  /** Path of the scrape endpoint. @default '/metrics' */
  readonly endpoint?: string;
  /**
   * Also make its meter provider the global one of `@opentelemetry/api`, so that every pipeline
   * (whose telemetry defaults to the global providers) reports here without being told. @default false
   */
  readonly global?: boolean;
}

/** Defaults of {@link PrometheusConfig}. */
export const DEFAULT_PROMETHEUS_CONFIG = Object.freeze({
  /** The OpenTelemetry Prometheus exporter's usual port. */
  port: 9464,
  /** Loopback only: expose it on purpose. */
  host: '127.0.0.1',
  /** Prometheus's usual scrape path. */
  endpoint: '/metrics',
  /** The endpoint's meter provider is not made the global one. */
  global: false,
} as const);

/** A running scrape endpoint. */
export interface PrometheusEndpoint {
  /** Give it to pipelines (`telemetry: { meterProvider }`) whose metrics this endpoint serves. */
  readonly meterProvider: MeterProviderLike;
  /** Where Prometheus scrapes: `http://host:port/metrics`. */
  readonly url: string;
  /** Stops the server and the meter provider. */
  close(): Promise<void>;
}

const INSTALL =
  'npm install @opentelemetry/api @opentelemetry/sdk-metrics @opentelemetry/exporter-prometheus';

async function loadExporter(): Promise<{
  exporter: typeof PrometheusExporterModule;
  sdk: typeof SdkMetricsModule;
}> {
  try {
    const [exporter, sdk] = await Promise.all([
      import('@opentelemetry/exporter-prometheus'),
      import('@opentelemetry/sdk-metrics'),
    ]);
    return { exporter, sdk };
  } catch (error) {
    throw new ConfigError(
      'prometheus',
      `the Prometheus endpoint needs the OpenTelemetry SDK and exporter (${errorText(error)}); run: ${INSTALL}`,
      { cause: error },
    );
  }
}

/** Starts `server` on `host:port` (0: a free port); resolves to the port it listens on. */
export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : port);
    });
  });
}

/**
 * Serves oncemq's metrics for Prometheus to scrape, through OpenTelemetry's Prometheus exporter: a
 * meter provider whose reader is the exporter, and a small HTTP server answering `GET /metrics`
 * (404 elsewhere). The instruments and their Prometheus names are in docs/observability.md.
 */
export async function servePrometheus(config: PrometheusConfig = {}): Promise<PrometheusEndpoint> {
  const port = config.port ?? DEFAULT_PROMETHEUS_CONFIG.port;
  const host = config.host ?? DEFAULT_PROMETHEUS_CONFIG.host;
  const endpoint = config.endpoint ?? DEFAULT_PROMETHEUS_CONFIG.endpoint;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new ConfigError('port', `expected a port number 0-65535, got ${String(port)}`);
  if (!endpoint.startsWith('/')) throw new ConfigError('endpoint', `must start with '/', got '${endpoint}'`);
  const api = await loadOtelApi();
  if (api === undefined)
    throw new ConfigError('prometheus', `@opentelemetry/api is not installed; run: ${INSTALL}`);
  const { exporter: exporterModule, sdk } = await loadExporter();
  const exporter = new exporterModule.PrometheusExporter({ preventServerStart: true });
  const meterProvider = new sdk.MeterProvider({ readers: [exporter] });
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method === 'GET' && path === endpoint) {
      exporter.getMetricsRequestHandler(request, response);
      return;
    }
    response.statusCode = 404;
    response.end(`not found; metrics are at ${endpoint}\n`);
  });
  let bound: number;
  try {
    bound = await listen(server, port, host);
  } catch (error) {
    await meterProvider.shutdown();
    throw new ConfigError('port', `cannot listen on ${host}:${port}: ${errorText(error)}`, { cause: error });
  }
  if (config.global === true) api.metrics.setGlobalMeterProvider(meterProvider);
  return {
    meterProvider,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}${endpoint}`,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await meterProvider.shutdown();
    },
  };
}
