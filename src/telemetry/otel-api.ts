import type { OtelApiLike } from './otel-like.js';

let loading: Promise<OtelApiLike | undefined> | undefined;
let loaded: OtelApiLike | undefined;

/**
 * `@opentelemetry/api`, imported once on first use; `undefined` when it is not installed (oncemq's
 * telemetry is then a no-op). Never rejects.
 */
export function loadOtelApi(): Promise<OtelApiLike | undefined> {
  loading ??= import('@opentelemetry/api').then(
    (api): OtelApiLike => (loaded = api),
    () => undefined,
  );
  return loading;
}

/** The API once {@link loadOtelApi} has found it; `undefined` before or when it is absent. */
export function loadedOtelApi(): OtelApiLike | undefined {
  return loaded;
}

/** Whether oncemq found `@opentelemetry/api` (`'absent'`: its telemetry is a no-op). */
export async function openTelemetryStatus(): Promise<'present' | 'absent'> {
  return (await loadOtelApi()) === undefined ? 'absent' : 'present';
}
