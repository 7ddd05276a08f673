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

export interface TracerProviderLike {
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

export interface MeterProviderLike {
  getMeter(name: string, version?: string): MeterLike;
}

/** The global entry points of `@opentelemetry/api` that oncemq uses. */
export interface OtelApiLike {
  readonly trace: {
    getTracerProvider(): TracerProviderLike;
    setSpan(context: ContextLike, span: SpanLike): ContextLike;
    getSpanContext(context: ContextLike): SpanContextLike | undefined;
    isSpanContextValid(spanContext: SpanContextLike): boolean;
  };
  readonly metrics: {
    getMeterProvider(): MeterProviderLike;
    setGlobalMeterProvider(provider: MeterProviderLike): boolean;
  };
  readonly context: {
    active(): ContextLike;
    with<F extends () => ReturnType<F>>(context: ContextLike, fn: F): ReturnType<F>;
  };
  readonly propagation: {
    inject(context: ContextLike, carrier: Record<string, string>): void;
    extract(context: ContextLike, carrier: Readonly<Record<string, string>>): ContextLike;
    /** The headers the registered propagator reads: none when no propagator is registered. */
    fields(): string[];
  };
  readonly ROOT_CONTEXT: ContextLike;
  /** The meter of the global meter provider when no SDK registered one. */
  readonly createNoopMeter?: () => MeterLike;
  readonly SpanKind: { readonly PRODUCER: number; readonly CONSUMER: number };
  readonly SpanStatusCode: { readonly ERROR: number };
}
