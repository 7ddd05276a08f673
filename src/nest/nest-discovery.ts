import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { Reflector } from '@nestjs/core';
import type { Handler } from '../consumer/handler.js';
import { ConfigError } from '../core/errors.js';
import { ONCEMQ_CONSUMER_METADATA } from './nest-consumer.js';
import type { OncemqConsumerOptions } from './nest-options.js';
import { DEFAULT_ONCEMQ_NAME } from './nest-tokens.js';

type Wrapper = ReturnType<DiscoveryService['getProviders']>[number];

/** One `@OncemqConsumer` method found on a provider or controller. */
export interface ConsumerDeclaration {
  /** `Class.method`, for errors and logs. */
  readonly where: string;
  readonly options: OncemqConsumerOptions;
  /** The method, bound to its instance. */
  readonly handler: Handler<unknown, unknown>;
}

const reflector = new Reflector();

/** The class whose prototype carries the decorators: the metatype, or the instance's class for factories and values. */
function classOf(wrapper: Wrapper): { prototype: object } | undefined {
  const useInstance = wrapper.metatype === null || wrapper.inject !== undefined;
  const type: unknown = useInstance
    ? (wrapper.instance as { constructor?: unknown } | null | undefined)?.constructor
    : wrapper.metatype;
  if (typeof type !== 'function') return undefined;
  const prototype = (type as { prototype?: unknown }).prototype;
  return typeof prototype === 'object' && prototype !== null ? { prototype } : undefined;
}

function consumerOptions(method: unknown): OncemqConsumerOptions | undefined {
  if (typeof method !== 'function') return undefined;
  return reflector.get<OncemqConsumerOptions | undefined>(ONCEMQ_CONSUMER_METADATA, method);
}

/**
 * Every `@OncemqConsumer` method of the application's providers and controllers, with the module name
 * it asked for. A consumer on a request-scoped or transient provider is refused: a subscription runs
 * on one instance for the application's life.
 */
export function findConsumers(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
): readonly (ConsumerDeclaration & { readonly moduleName: string })[] {
  const found: (ConsumerDeclaration & { moduleName: string })[] = [];
  const seen = new Set<unknown>();
  for (const wrapper of [...discovery.getProviders(), ...discovery.getControllers()]) {
    const type = classOf(wrapper);
    if (type === undefined) continue;
    const instance = wrapper.instance as Record<string, unknown> | null | undefined;
    if (instance !== null && instance !== undefined && seen.has(instance)) continue;
    seen.add(instance);
    const prototype = type.prototype as Record<string, unknown>;
    for (const method of scanner.getAllMethodNames(prototype)) {
      const options = consumerOptions(prototype[method]);
      if (options === undefined) continue;
      const className = (prototype.constructor as { name?: string } | undefined)?.name ?? 'anonymous';
      const where = `${className}.${method}`;
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
        throw new ConfigError(
          `@OncemqConsumer ${where}`,
          "the provider is request-scoped or transient (or depends on one); a consumer runs on one instance for the application's life: make it a singleton",
        );
      }
      const bound = instance?.[method];
      if (typeof bound !== 'function') continue;
      found.push({
        where,
        options,
        moduleName: options.moduleName ?? DEFAULT_ONCEMQ_NAME,
        handler: (message, ctx) => (bound as Handler<unknown, unknown>).call(instance, message, ctx),
      });
    }
  }
  return found;
}
