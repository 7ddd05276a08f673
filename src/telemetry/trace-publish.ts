import type { OutgoingMessage, PublishReceipt } from '../transport/transport.js';
import { loadedOtelApi, loadOtelApi } from './otel-api.js';
import type { AttributesLike, OtelApiLike } from './otel-like.js';
import { ATTRIBUTES, INSTRUMENTATION_SCOPE } from './telemetry-names.js';

/** The W3C Trace Context headers a producer writes and a consumer reads. */
export const TRACE_HEADERS = Object.freeze({
  /** `traceparent`: trace id, parent span id and flags. */
  parent: 'traceparent',
  /** `tracestate`: vendor-specific trace state. */
  state: 'tracestate',
});

/**
 * Publishes `message` inside a PRODUCER span (`send {topic}`) and carries that span's context in the
 * message headers (W3C `traceparent`/`tracestate`, through the global propagator), so that the
 * consumer's process span continues the trace. Every oncemq producer calls it with its own send:
 * `publish(m) { return tracePublish(this.name, m, (traced) => this.#send(traced)); }`.
 * Without `@opentelemetry/api` (or without a registered SDK) it sends the message as it is.
 */
export function tracePublish<R extends object>(
  system: string,
  message: OutgoingMessage,
  send: (message: OutgoingMessage) => Promise<R>,
): Promise<R> {
  // Once the API was looked for, a publish goes on in the same turn: no await before the send.
  const api = loadedOtelApi();
  if (api !== undefined) return sendTraced(api, system, message, send);
  return loadOtelApi().then((found) =>
    found === undefined ? send(message) : sendTraced(found, system, message, send),
  );
}

async function sendTraced<R extends object>(
  api: OtelApiLike,
  system: string,
  message: OutgoingMessage,
  send: (message: OutgoingMessage) => Promise<R>,
): Promise<R> {
  const active = api.context.active();
  // Built by assignment: V8 takes a slow path for a spread among other properties (once per publish).
  const attributes: AttributesLike = {
    [ATTRIBUTES.system]: system,
    [ATTRIBUTES.destination]: message.topic,
    [ATTRIBUTES.operationType]: 'send',
    [ATTRIBUTES.operationName]: 'send',
  };
  if (message.key !== undefined) attributes[ATTRIBUTES.key] = message.key;
  const span = api.trace
    .getTracerProvider()
    .getTracer(INSTRUMENTATION_SCOPE)
    .startSpan(`send ${message.topic}`, { kind: api.SpanKind.PRODUCER, attributes }, active);
  if (!api.trace.isSpanContextValid(span.spanContext())) {
    span.end();
    return send(message);
  }
  const headers: Record<string, string> = Object.assign({}, message.headers);
  api.propagation.inject(api.trace.setSpan(active, span), headers);
  try {
    const receipt = await send(Object.assign({}, message, { headers }));
    const brokerId = (receipt as Partial<PublishReceipt>).brokerId;
    if (typeof brokerId === 'string') span.setAttribute(ATTRIBUTES.messageId, brokerId);
    return receipt;
  } catch (error) {
    span.setAttribute(ATTRIBUTES.errorType, error instanceof Error ? error.name : typeof error);
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: String(error) });
    throw error;
  } finally {
    span.end();
  }
}
