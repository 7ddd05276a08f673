import { ExportResultCode } from '@opentelemetry/core';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { TelemetryConfig } from '../src/telemetry/pipeline-telemetry.js';

/** A metric reader that aggregates in memory and is only read when a test asks (never here). */
class HeldReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** An exporter that accepts every batch and keeps nothing: the SDK's work is measured, not I/O. */
const DISCARD: SpanExporter = {
  export: (_spans, done) => done({ code: ExportResultCode.SUCCESS }),
  shutdown: () => Promise.resolve(),
};

/**
 * The OpenTelemetry SDK as a service would run it: every instrument aggregated by a meter provider,
 * every span sampled and handed to a batch span processor (whose exporter discards the batches).
 */
export function benchTelemetry(): { config: TelemetryConfig; shutdown: () => Promise<void> } {
  const meterProvider = new MeterProvider({ readers: [new HeldReader()] });
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(DISCARD)] });
  return {
    config: { meterProvider, tracerProvider },
    shutdown: async () => {
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
    },
  };
}
