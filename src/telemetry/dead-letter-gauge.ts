import { ConfigError } from '../core/errors.js';
import { validateGroup } from '../core/group.js';
import type { Transport } from '../transport/transport.js';
import { loadOtelApi } from './otel-api.js';
import type { MeterProviderLike, ObservableResultLike } from './otel-like.js';
import { ATTRIBUTES, INSTRUMENTATION_SCOPE, METRICS } from './telemetry-names.js';

/** Input of {@link observeDeadLetterDepth}. */
export interface DeadLetterGaugeConfig {
  /** Where the gauge is created. @default the global meter provider of `@opentelemetry/api` */
  readonly meterProvider?: MeterProviderLike;
}

/** A running observation; `close()` stops it. */
export interface DeadLetterGauge {
  /** Stops reporting: the gauge's callback is removed, the broker is not read again. */
  close(): void;
}

/**
 * Reports the dead-letter depth of each of `groups` as the `oncemq.dead_letter.depth` gauge, read
 * from the broker at every collection (a scrape, an export). Refused for a transport whose dead
 * letters cannot tell their depth without reading them; a no-op without `@opentelemetry/api`. A
 * group whose queue cannot be read at collection time reports nothing (never a false zero).
 */
export async function observeDeadLetterDepth(
  transport: Pick<Transport, 'name' | 'capabilities' | 'deadLetters'>,
  groups: readonly string[],
  config: DeadLetterGaugeConfig = {},
): Promise<DeadLetterGauge> {
  const { deadLetters } = transport;
  const depth = deadLetters.depth?.bind(deadLetters);
  if (!transport.capabilities.deadLetter || depth === undefined) {
    throw new ConfigError(
      'transport',
      `the ${transport.name} transport cannot tell its dead-letter depth without reading the messages`,
    );
  }
  for (const group of groups) validateGroup(group);
  const api = await loadOtelApi();
  if (api === undefined) return { close: () => undefined };
  const meter = (config.meterProvider ?? api.metrics.getMeterProvider()).getMeter(INSTRUMENTATION_SCOPE);
  const gauge = meter.createObservableGauge(METRICS.deadLetterDepth, {
    description: "Dead letters waiting in the group's dead-letter queue",
    unit: '{message}',
  });
  const callback = async (result: ObservableResultLike): Promise<void> => {
    await Promise.all(
      groups.map(async (group) => {
        try {
          result.observe(await depth(group), {
            [ATTRIBUTES.system]: transport.name,
            [ATTRIBUTES.group]: group,
          });
        } catch {
          // Unreadable now (broker away, queue missing): no value rather than a false zero.
        }
      }),
    );
  };
  gauge.addCallback(callback);
  return { close: () => gauge.removeCallback(callback) };
}
