/**
 * The part of `@opentelemetry/api` oncemq calls, typed here so that the API stays an optional peer:
 * oncemq never imports it statically, and these shapes accept the real API's objects (a
 * `MeterProvider` or `TracerProvider` of the SDK fits them as it is).
 */

export type AttributeValue = string | number | boolean;

export type AttributesLike = Record<string, AttributeValue | undefined>;

/** An opaque OpenTelemetry context. */
export type ContextLike = object;

export interface SpanContextLike {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
}

export interface SpanLike {
  setAttribute(key: string, value: AttributeValue): unknown;
  setAttributes(attributes: AttributesLike): unknown;
  addEvent(name: string, attributes?: AttributesLike): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
  spanContext(): SpanContextLike;
  isRecording(): boolean;
}

export interface SpanOptionsLike {
  kind?: number;
  attributes?: AttributesLike;
  links?: { context: SpanContextLike; attributes?: AttributesLike }[];
}

export interface TracerLike {
  startSpan(name: string, options?: SpanOptionsLike, context?: ContextLike): SpanLike;
}

/** A `TracerProvider` of `@opentelemetry/api` (the SDK's fits as it is): where oncemq's spans go. */
export interface TracerProviderLike {
  /** The tracer of instrumentation scope `name` (oncemq asks for `oncemq`). */
  getTracer(name: string, version?: string): TracerLike;
}

export interface CounterLike {
  add(value: number, attributes?: AttributesLike): void;
}

export interface HistogramLike {
  record(value: number, attributes?: AttributesLike): void;
}

export interface ObservableResultLike {
  observe(value: number, attributes?: AttributesLike): void;
}

export type ObservableCallbackLike = (result: ObservableResultLike) => void | Promise<void>;

export interface ObservableGaugeLike {
  addCallback(callback: ObservableCallbackLike): void;
  removeCallback(callback: ObservableCallbackLike): void;
}

export interface InstrumentOptionsLike {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}

export interface MeterLike {
  createCounter(name: string, options?: InstrumentOptionsLike): CounterLike;
  createHistogram(name: string, options?: InstrumentOptionsLike): HistogramLike;
  createObservableGauge(name: string, options?: InstrumentOptionsLike): ObservableGaugeLike;
  createObservableCounter(name: string, options?: InstrumentOptionsLike): ObservableGaugeLike;
}

/** A `MeterProvider` of `@opentelemetry/api` (the SDK's fits as it is): where oncemq's metrics go. */
export interface MeterProviderLike {
  /** The meter of instrumentation scope `name` (oncemq asks for `oncemq`). */
  getMeter(name: string, version?: string): MeterLike;
}

/** The global entry points of `@opentelemetry/api` that oncemq uses. */
export interface OtelApiLike {
  /** `trace` of the API. */
  readonly trace: {
    /** The global tracer provider (a no-op one when no SDK registered one). */
    getTracerProvider(): TracerProviderLike;
    /** A context holding `span` as the active span. */
    setSpan(context: ContextLike, span: SpanLike): ContextLike;
    /** The span context of the active span in `context`, if any. */
    getSpanContext(context: ContextLike): SpanContextLike | undefined;
    /** False for the invalid span context of a no-op tracer: oncemq then skips its trace work. */
    isSpanContextValid(spanContext: SpanContextLike): boolean;
  };
  /** `metrics` of the API. */
  readonly metrics: {
    /** The global meter provider (a no-op one when no SDK registered one). */
    getMeterProvider(): MeterProviderLike;
    /** Registers a global meter provider (used by `servePrometheus` with `global: true`). */
    setGlobalMeterProvider(provider: MeterProviderLike): boolean;
  };
  /** `context` of the API. */
  readonly context: {
    /** The active context. */
    active(): ContextLike;
    /**
     * Runs `fn` with `context` active and returns what it returns.
     * @typeParam F - the function run, whose return type `with` passes through
     */
    with<F extends () => ReturnType<F>>(context: ContextLike, fn: F): ReturnType<F>;
  };
  /** `propagation` of the API: trace context in message headers. */
  readonly propagation: {
    /** Writes `context`'s trace headers into `carrier` (a published message's headers). */
    inject(context: ContextLike, carrier: Record<string, string>): void;
    /** Reads the trace headers of `carrier` (a delivery's headers) into a context. */
    extract(context: ContextLike, carrier: Readonly<Record<string, string>>): ContextLike;
    /** The headers the registered propagator reads: none when no propagator is registered. */
    fields(): string[];
  };
  /** The empty root context. */
  readonly ROOT_CONTEXT: ContextLike;
  /** The meter of the global meter provider when no SDK registered one. */
  readonly createNoopMeter?: () => MeterLike;
  /** The span kinds oncemq uses. */
  readonly SpanKind: {
    /** A publish's span. */
    readonly PRODUCER: number;
    /** A delivery's span. */
    readonly CONSUMER: number;
  };
  /** The span status codes oncemq uses. */
  readonly SpanStatusCode: {
    /** A delivery whose outcome is `retry`, `conflict` or `dead`, or a publish that failed. */
    readonly ERROR: number;
  };
}
