/**
 * A Prometheus scrape endpoint for oncemq's OpenTelemetry metrics (docs/observability.md).
 *
 * @module oncemq/prometheus
 */
export { DEFAULT_PROMETHEUS_CONFIG, servePrometheus } from './telemetry/prometheus-endpoint.js';
export type { PrometheusConfig, PrometheusEndpoint } from './telemetry/prometheus-endpoint.js';
