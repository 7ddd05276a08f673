export { DEFAULT_PROMETHEUS_CONFIG, servePrometheus } from './telemetry/prometheus-endpoint.js';
export type { PrometheusConfig, PrometheusEndpoint } from './telemetry/prometheus-endpoint.js';
