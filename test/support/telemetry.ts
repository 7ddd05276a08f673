import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  propagation,
  trace,
  ROOT_CONTEXT,
  type Context,
  type ContextManager,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type DataPoint,
  type Histogram,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';

type Attributes = Readonly<Record<string, unknown>>;

/** The OpenTelemetry metrics SDK with an in-memory exporter, read on demand. */
export class MetricsProbe {
  readonly exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  readonly reader = new PeriodicExportingMetricReader({
    exporter: this.exporter,
    exportIntervalMillis: 3_600_000,
  });
  readonly meterProvider = new MeterProvider({ readers: [this.reader] });

  /** Collects now and returns every data point of `name`. */
  async points(name: string): Promise<DataPoint<unknown>[]> {
    this.exporter.reset();
    await this.reader.forceFlush();
    const points: DataPoint<unknown>[] = [];
    for (const resource of this.exporter.getMetrics()) {
      for (const scope of resource.scopeMetrics) {
        for (const metric of scope.metrics) {
          if (metric.descriptor.name === name) points.push(...(metric.dataPoints as DataPoint<unknown>[]));
        }
      }
    }
    return points;
  }

  /** The sum of counter `name` over the points whose attributes include `match`. */
  async count(name: string, match: Attributes = {}): Promise<number> {
    let total = 0;
    for (const point of await this.points(name)) {
      if (matches(point.attributes, match)) total += point.value as number;
    }
    return total;
  }

  /** Observations recorded by histogram `name` over the points whose attributes include `match`. */
  async observations(name: string, match: Attributes = {}): Promise<number> {
    let total = 0;
    for (const point of await this.points(name)) {
      if (matches(point.attributes, match)) total += (point.value as Histogram).count;
    }
    return total;
  }

  shutdown(): Promise<void> {
    return this.meterProvider.shutdown();
  }
}

function matches(attributes: Attributes, match: Attributes): boolean {
  return Object.entries(match).every(([name, value]) => attributes[name] === value);
}

/**
 * The tracing SDK with an in-memory exporter, registered as the global tracer provider with the W3C
 * Trace Context propagator: oncemq's producers and pipelines then trace into it.
 */
export class SpanProbe {
  readonly exporter = new InMemorySpanExporter();
  readonly tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(this.exporter)],
  });

  registerGlobally(): this {
    trace.setGlobalTracerProvider(this.tracerProvider);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    return this;
  }

  spans(): ReadableSpan[] {
    return this.exporter.getFinishedSpans();
  }

  async shutdown(): Promise<void> {
    trace.disable();
    propagation.disable();
    await this.tracerProvider.shutdown();
  }
}

/**
 * The smallest context manager on AsyncLocalStorage (what `@opentelemetry/context-async-hooks`
 * does), so a test can see the context a handler runs in. `register()` makes it global until
 * `unregister()`.
 */
export class StorageContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(active, () => fn.apply(thisArg, args));
  }

  bind<T>(_context: Context, target: T): T {
    return target;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.#storage.disable();
    return this;
  }

  register(): this {
    context.setGlobalContextManager(this);
    return this;
  }

  unregister(): void {
    context.disable();
  }
}
