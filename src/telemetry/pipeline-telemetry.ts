import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { Ledger } from '../ledger/ledger.js';
import {
  countingTrace,
  NO_TRACE,
  RecordingTrace,
  type DeliverySpan,
  type DeliveryTrace,
} from './delivery-trace.js';
import { loadOtelApi } from './otel-api.js';
import type {
  AttributesLike,
  MeterLike,
  MeterProviderLike,
  OtelApiLike,
  SpanContextLike,
  TracerLike,
  TracerProviderLike,
} from './otel-like.js';
import { PipelineInstruments } from './pipeline-instruments.js';
import { ATTRIBUTES, INSTRUMENTATION_SCOPE, METRICS } from './telemetry-names.js';
import { TRACE_HEADERS } from './trace-publish.js';

/** The W3C trace flag of a sampled trace. */
const SAMPLED = 0x01;

/** OpenTelemetry for a pipeline: `createPipeline({ …, telemetry: { … } })`, or `false` for none. */
export interface TelemetryConfig {
  /** Where the metrics go; `false` records none. @default the global meter provider of `@opentelemetry/api` */
  readonly meterProvider?: MeterProviderLike | false;
  /** Where the spans go; `false` starts none. @default the global tracer provider of `@opentelemetry/api` */
  readonly tracerProvider?: TracerProviderLike | false;
  /**
   * The `messaging.system` attribute of the pipeline's spans and metrics: the name of the transport
   * that feeds it (`transport.name`: `rabbitmq`, `nats`, …). @default omitted
   */
  readonly system?: string;
  /**
   * The share of deliveries, drawn at random per delivery (above 0, at most 1), that oncemq times
   * into its latency histograms and, unless the producer's trace is sampled, traces. The counters
   * count every delivery whatever the rate, and a delivery whose producer's trace is sampled always
   * gets its span (the trace is never cut); the tracer provider's sampler then decides as usual. A
   * sampled histogram keeps its buckets' proportions (percentiles, the mean) while its `_count` and
   * `_sum` are the sample's. For consumers of tens of thousands of messages a second, where a
   * histogram recording and a span, even an unsampled one, weigh against the pipeline itself
   * (docs/observability.md, Cost). @default 1
   */
  readonly sampleRate?: number;
}

/** Defaults of {@link TelemetryConfig}: the global providers, whatever they are (no-op until an SDK registers). */
export const DEFAULT_TELEMETRY_CONFIG: TelemetryConfig = Object.freeze({});

/** Checks a pipeline's `telemetry` field at start-up. */
export function validateTelemetry(telemetry: unknown): TelemetryConfig | false {
  if (telemetry === undefined) return DEFAULT_TELEMETRY_CONFIG;
  if (telemetry === false) return false;
  if (typeof telemetry !== 'object' || telemetry === null)
    throw new ConfigError(
      'telemetry',
      'expected an object ({ meterProvider, tracerProvider, system, sampleRate }) or false',
    );
  const config = telemetry as Record<string, unknown>;
  for (const [field, method] of [
    ['meterProvider', 'getMeter'],
    ['tracerProvider', 'getTracer'],
  ] as const) {
    const provider = config[field] as Record<string, unknown> | false | null | undefined;
    if (provider !== undefined && provider !== false && typeof provider?.[method] !== 'function')
      throw new ConfigError(
        `telemetry.${field}`,
        `expected an OpenTelemetry provider (with ${method}) or false`,
      );
  }
  if (config.system !== undefined && (typeof config.system !== 'string' || config.system === ''))
    throw new ConfigError('telemetry.system', 'expected the transport name, such as "rabbitmq"');
  const rate = config.sampleRate;
  if (rate !== undefined && (typeof rate !== 'number' || !(rate > 0 && rate <= 1)))
    throw new ConfigError(
      'telemetry.sampleRate',
      `expected a share of deliveries above 0 and at most 1, got ${JSON.stringify(rate)}`,
    );
  return Object.freeze({ ...(telemetry as TelemetryConfig) });
}

/** Starts the trace of each delivery of one pipeline. */
export interface PipelineTelemetry {
  /** `started`: the `performance.now()` at which the pipeline took the delivery. */
  start(envelope: Envelope, started: number): DeliveryTrace;
  /** Stops observing the gauges. */
  close(): void;
}

export const NO_TELEMETRY: PipelineTelemetry = Object.freeze({
  start: () => NO_TRACE,
  close: () => undefined,
});

/** What a pipeline's telemetry is opened for. */
export interface TelemetryTarget {
  readonly group: string;
  readonly ledger: Ledger;
}

class OpenTelemetryPipeline implements PipelineTelemetry {
  readonly #instruments: PipelineInstruments | undefined;
  readonly #sampleRate: number;
  /** The trace of the deliveries that are only counted (or not even that, without a meter). */
  readonly #counting: DeliveryTrace;
  readonly #spanAttributes: AttributesLike;
  readonly #close: () => void;
  /** The tracer spans start on, once there is one. */
  #tracer: TracerLike | undefined;
  /** The proxy provider whose SDK has not registered yet: asked per delivery until it has. */
  #awaiting: DelegatingTracerProviderLike | undefined;

  constructor(
    private readonly api: OtelApiLike,
    meter: MeterLike | undefined,
    tracer: TracerLike | DelegatingTracerProviderLike | undefined,
    target: TelemetryTarget,
    system: string | undefined,
    sampleRate: number,
  ) {
    if (tracer !== undefined && isDelegating(tracer)) this.#awaiting = tracer;
    else this.#tracer = tracer;
    this.#sampleRate = sampleRate;
    this.#instruments =
      meter === undefined ? undefined : new PipelineInstruments(meter, target.group, system);
    this.#close = meter === undefined ? () => undefined : observeLedger(meter, target);
    this.#counting = this.#instruments === undefined ? NO_TRACE : countingTrace(this.#instruments);
    this.#spanAttributes = Object.freeze({
      ...(system === undefined ? {} : { [ATTRIBUTES.system]: system }),
      [ATTRIBUTES.group]: target.group,
      [ATTRIBUTES.operationType]: 'process',
      [ATTRIBUTES.operationName]: 'process',
    });
  }

  start(envelope: Envelope, started: number): DeliveryTrace {
    const rate = this.#sampleRate;
    const taken = rate === 1 || Math.random() < rate;
    const delivery = this.#span(envelope, taken);
    if (delivery === undefined && (!taken || this.#instruments === undefined)) return this.#counting;
    return new RecordingTrace(this.#instruments, delivery, started, taken);
  }

  /**
   * The delivery's CONSUMER span. The producer's context carried in the headers is its parent (one
   * trace from publish to effect) and also its link, as the messaging conventions ask of process
   * spans. A delivery the sample did not take gets no span unless its producer's trace is sampled;
   * its handler still runs in the producer's context, so its own spans follow that trace's decision.
   */
  #span(envelope: Envelope, taken: boolean): DeliverySpan | undefined {
    const { api } = this;
    const tracer = this.#tracer ?? this.#registered();
    const carried = envelope.headers[TRACE_HEADERS.parent] !== undefined;
    if (tracer === undefined) {
      // No SDK, no span; a propagator registered without one still hands the handler the producer's context.
      if (!carried || api.propagation.fields().length === 0) return undefined;
      return {
        api,
        span: undefined,
        context: api.propagation.extract(api.context.active(), envelope.headers),
      };
    }
    if (!taken && !carried) return undefined;
    const active = api.context.active();
    let parent = active;
    let links: { context: SpanContextLike }[] | undefined;
    if (carried) {
      parent = api.propagation.extract(active, envelope.headers);
      const creation = api.trace.getSpanContext(parent);
      if (creation !== undefined && api.trace.isSpanContextValid(creation)) {
        links = [{ context: creation }];
        taken ||= (creation.traceFlags & SAMPLED) !== 0;
      }
      if (!taken) return { api, span: undefined, context: parent };
    }
    const span = tracer.startSpan(
      `process ${envelope.topic}`,
      {
        kind: api.SpanKind.CONSUMER,
        attributes: {
          ...this.#spanAttributes,
          [ATTRIBUTES.destination]: envelope.topic,
          [ATTRIBUTES.messageId]: envelope.brokerId,
        },
        ...(links === undefined ? {} : { links }),
      },
      parent,
    );
    return { api, span, context: api.trace.setSpan(parent, span) };
  }

  /**
   * The SDK's tracer once one is registered behind the global proxy, from then on; until then
   * `undefined`, and the delivery gets no span (a proxy without an SDK answers a no-op span, which
   * costs its attributes, a context and the handler's run inside it, and records nothing). Asking
   * costs a property read and allocates nothing.
   */
  #registered(): TracerLike | undefined {
    const awaiting = this.#awaiting;
    if (awaiting === undefined) return undefined;
    const tracer = awaiting.getDelegateTracer(INSTRUMENTATION_SCOPE);
    if (tracer !== undefined) {
      this.#tracer = tracer;
      this.#awaiting = undefined;
    }
    return tracer;
  }

  close(): void {
    this.#close();
  }
}

/**
 * A tracer provider that hands its calls to an SDK registered later, or to none: the global
 * `ProxyTracerProvider` of `@opentelemetry/api`, whose `getDelegateTracer` answers `undefined`
 * until an SDK registers.
 */
interface DelegatingTracerProviderLike extends TracerProviderLike {
  getDelegateTracer(name: string, version?: string): TracerLike | undefined;
}

function isDelegating(provider: TracerProviderLike | TracerLike): provider is DelegatingTracerProviderLike {
  return typeof (provider as Partial<DelegatingTracerProviderLike>).getDelegateTracer === 'function';
}

/**
 * Whether `meter` is the API's no-op meter: the meter of the global provider when no SDK had
 * registered one. `@opentelemetry/api` 1.x has no proxy for meters, so such a meter stays a no-op
 * and the pipeline keeps no instruments for it.
 */
function isNoopMeter(api: OtelApiLike, meter: MeterLike): boolean {
  return (
    api.createNoopMeter !== undefined &&
    Object.getPrototypeOf(meter) === Object.getPrototypeOf(api.createNoopMeter())
  );
}

/** The age of the group's stalest PROCESSING claim, where the ledger can list its rows. */
function observeLedger(meter: MeterLike, { group, ledger }: TelemetryTarget): () => void {
  if (!ledger.capabilities.inspect) return () => undefined;
  const gauge = meter.createObservableGauge(METRICS.oldestProcessing, {
    description: 'Seconds since the stalest PROCESSING claim of the group was claimed or renewed',
    unit: 's',
  });
  const attributes = Object.freeze({ [ATTRIBUTES.group]: group });
  const callback = async (result: { observe(value: number, attributes?: AttributesLike): void }) => {
    try {
      const [oldest] = await ledger.list({ group, status: 'PROCESSING', limit: 1 });
      result.observe(oldest === undefined ? 0 : (Date.now() - oldest.updatedAt.getTime()) / 1000, attributes);
    } catch {
      // An unreachable ledger reports no value rather than a false zero.
    }
  };
  gauge.addCallback(callback);
  return () => gauge.removeCallback(callback);
}

/** Opens a pipeline's telemetry: a no-op when it is off or `@opentelemetry/api` is not installed. */
export async function openPipelineTelemetry(
  config: TelemetryConfig | false,
  target: TelemetryTarget,
): Promise<PipelineTelemetry> {
  if (config === false) return NO_TELEMETRY;
  const api = await loadOtelApi();
  if (api === undefined) return NO_TELEMETRY;
  const meterProvider = config.meterProvider ?? api.metrics.getMeterProvider();
  const tracerProvider = config.tracerProvider ?? api.trace.getTracerProvider();
  const opened = meterProvider === false ? undefined : meterProvider.getMeter(INSTRUMENTATION_SCOPE);
  const meter = opened === undefined || isNoopMeter(api, opened) ? undefined : opened;
  const tracer =
    tracerProvider === false
      ? undefined
      : isDelegating(tracerProvider)
        ? (tracerProvider.getDelegateTracer(INSTRUMENTATION_SCOPE) ?? tracerProvider)
        : tracerProvider.getTracer(INSTRUMENTATION_SCOPE);
  if (meter === undefined && tracer === undefined) return NO_TELEMETRY;
  return new OpenTelemetryPipeline(api, meter, tracer, target, config.system, config.sampleRate ?? 1);
}
