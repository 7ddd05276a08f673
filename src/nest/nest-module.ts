import type { DynamicModule, FactoryProvider, Provider } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { ConfigError } from '../core/errors.js';
import {
  DEFAULT_ONCEMQ_MODULE_OPTIONS,
  type OncemqModuleAsyncOptions,
  type OncemqModuleConfig,
  type OncemqModuleOptions,
} from './nest-options.js';
import { openResources, type OncemqResources } from './nest-resources.js';
import { OncemqRuntime } from './nest-runtime.js';
import {
  getLedgerToken,
  getOncemqOptionsToken,
  getOncemqRuntimeToken,
  getOutboxToken,
  getRelayToken,
  getTransportToken,
} from './nest-tokens.js';

const resourcesToken = (name: string): string => `${getOncemqRuntimeToken(name)}:resources`;

function checkName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new ConfigError('name', 'must be a non-empty string');
  }
  return name;
}

/** The providers every instance of the module has, around the provider of its configuration. */
function moduleOf(
  name: string,
  global: boolean,
  options: Provider,
  imports: NonNullable<DynamicModule['imports']>,
  extra: readonly Provider[],
): DynamicModule {
  const resources = resourcesToken(name);
  const from = <T>(provide: string, pick: (held: OncemqResources) => T): FactoryProvider<T> => ({
    provide,
    useFactory: pick,
    inject: [resources],
  });
  const providers: Provider[] = [
    options,
    ...extra,
    {
      provide: resources,
      useFactory: (config: OncemqModuleConfig) => openResources(name, config),
      inject: [getOncemqOptionsToken(name)],
    },
    {
      provide: getOncemqRuntimeToken(name),
      useFactory: (held: OncemqResources, discovery: DiscoveryService, scanner: MetadataScanner) =>
        new OncemqRuntime(held, discovery, scanner),
      inject: [resources, DiscoveryService, MetadataScanner],
    },
    from(getLedgerToken(name), (held) => held.ledger),
    from(getTransportToken(name), (held) => held.transport),
    from(getOutboxToken(name), (held) => held.outbox),
    from(getRelayToken(name), (held) => held.relay),
  ];
  return {
    module: OncemqModule,
    global,
    imports: [DiscoveryModule, ...imports],
    providers,
    exports: [
      getLedgerToken(name),
      getTransportToken(name),
      getOutboxToken(name),
      getRelayToken(name),
      getOncemqOptionsToken(name),
    ],
  };
}

/**
 * oncemq in a Nest application: a ledger, a transport, and optionally an outbox and its relay as
 * injectable providers (`@InjectLedger()`, `@InjectTransport()`, `@InjectOutbox()`, `@InjectRelay()`),
 * and every `@OncemqConsumer` method of the application's providers subscribed at bootstrap and
 * drained at shutdown (docs/nest.md).
 */
// eslint-disable-next-line @typescript-eslint/no-extraneous-class -- Nest imports a module as a class
export class OncemqModule {
  /**
   * The module from its configuration. A ledger or transport given as an instance stays the
   * application's (never closed by the module); given as a function, the module creates it at start
   * and closes it at shutdown.
   */
  static forRoot<Tx = unknown>(options: OncemqModuleOptions<Tx>): DynamicModule {
    const {
      name = DEFAULT_ONCEMQ_MODULE_OPTIONS.name,
      global = DEFAULT_ONCEMQ_MODULE_OPTIONS.global,
      ...config
    } = options;
    const checked = checkName(name);
    return moduleOf(checked, global, { provide: getOncemqOptionsToken(checked), useValue: config }, [], []);
  }

  /**
   * The module from a factory that injects what it needs (a pool from a database module, a
   * `ConfigService`): `forRootAsync({ imports, inject, useFactory })`.
   */
  static forRootAsync<Tx = unknown>(options: OncemqModuleAsyncOptions<Tx>): DynamicModule {
    const name = checkName(options.name ?? DEFAULT_ONCEMQ_MODULE_OPTIONS.name);
    if (typeof options.useFactory !== 'function') {
      throw new ConfigError('useFactory', 'must be a function returning { transport, ledger?, outbox? }');
    }
    const factory: FactoryProvider = {
      provide: getOncemqOptionsToken(name),
      useFactory: options.useFactory as (...args: unknown[]) => OncemqModuleConfig<Tx>,
      inject: options.inject ?? [],
    };
    return moduleOf(
      name,
      options.global ?? DEFAULT_ONCEMQ_MODULE_OPTIONS.global,
      factory,
      options.imports ?? [],
      options.extraProviders ?? [],
    );
  }
}
