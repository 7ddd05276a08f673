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

/** The share of deliveries a sampled set-up times and traces, unless `--flag sampleRate` says otherwise. */
export const BENCH_SAMPLE_RATE = 0.01;

/**
 * The OpenTelemetry SDK as a service would run it: every instrument aggregated by a meter provider,
 * spans handed to a batch span processor (whose exporter discards the batches). `full`: every delivery
 * timed and traced; `sampled`: the set-up docs/observability.md recommends for fast consumers
 * (`sampleRate`, 0.01 by default) — the counters still count every delivery, and one delivery in a hundred is
 * timed into the histograms and traced (the SDK's default sampler records every span started).
 */
export function benchTelemetry(
  profile: 'full' | 'sampled' = 'full',
  sampleRate = BENCH_SAMPLE_RATE,
): {
  config: TelemetryConfig;
  shutdown: () => Promise<void>;
} {
  const meterProvider = new MeterProvider({ readers: [new HeldReader()] });
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(DISCARD)] });
  return {
    config: {
      meterProvider,
      tracerProvider,
      ...(profile === 'sampled' ? { sampleRate } : {}),
    },
    shutdown: async () => {
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
    },
  };
}
