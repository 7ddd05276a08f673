import type {
  DynamicModule,
  ForwardReference,
  InjectionToken,
  OptionalFactoryDependency,
  Provider,
  Type,
} from '@nestjs/common';
import type { PipelineConfig } from '../consumer/pipeline-config.js';
import type { LoggerLike } from '../core/logger.js';
import type { Ledger } from '../ledger/ledger.js';
import type { OutboxConfig } from '../outbox/outbox-config.js';
import type { OutboxDatabase } from '../outbox/outbox-database.js';
import type { RelayConfig } from '../outbox/relay-config.js';
import type { SubscribeOptions, Transport } from '../transport/transport.js';
import { DEFAULT_ONCEMQ_NAME } from './nest-tokens.js';

/**
 * A ledger or transport for the module, in one of two hands:
 * - **an instance** is the application's: the module uses it and never closes it (close it yourself,
 *   after the application closed), as a ledger never ends the pool it was given;
 * - **a function** that creates one is called once when the module starts, and what it returns is the
 *   module's: closed at shutdown, after the consumers drained (as a ledger ends the pool it made
 *   from a `connectionString`).
 */
export type OncemqResource<T> = T | (() => T | Promise<T>);

/**
 * The transactional outbox of the module's ledger (`createOutbox`), injectable with `@InjectOutbox()`,
 * given to every transactional consumer as `ctx.outbox`, and, with `relay`, published by a relay
 * that runs from bootstrap to shutdown.
 */
export interface OncemqOutboxOptions<Tx = unknown> extends Omit<OutboxConfig<Tx>, 'ledger'> {
  /**
   * Creates the outbox tables when missing (`outbox.migrate(database)`) at bootstrap, on this
   * database: a pg or mysql2 pool, or a better-sqlite3 database. @default none: run `outbox.migrate` yourself
   */
  readonly migrate?: OutboxDatabase;
  /**
   * Runs a relay (`createRelay`) publishing the outbox on the module's transport: started at
   * bootstrap, stopped at shutdown before the transport closes. `database` is where it opens its own
   * short transactions (a pool). @default none: no relay in this application
   */
  readonly relay?: Omit<RelayConfig<Tx>, 'outbox' | 'transport'>;
}

/** Pipeline settings every consumer of the module starts from; a consumer's own settings win. */
export type OncemqConsumerDefaults = Pick<
  OncemqConsumerOptions,
  | 'mode'
  | 'retry'
  | 'replayMargin'
  | 'lease'
  | 'renewEvery'
  | 'onFailure'
  | 'serializer'
  | 'onOutcome'
  | 'telemetry'
  | 'subscribe'
>;

/** What the module is built from: `forRoot`'s options, or what `forRootAsync`'s factory returns. */
export interface OncemqModuleConfig<Tx = unknown> {
  /**
   * The broker every consumer of the module subscribes on and the relay publishes to (injectable with
   * `@InjectTransport()` to publish): an instance (yours) or a function creating one (the module's).
   */
  readonly transport: OncemqResource<Transport>;
  /**
   * The ledger every consumer claims in: any `Ledger` — `PostgresLedger`, `MysqlLedger`, an ORM's —
   * as an instance (yours) or a function creating one (the module's). @default none: the module only
   * publishes, and a consumer fails the bootstrap
   */
  readonly ledger?: OncemqResource<Ledger<Tx>>;
  /** The outbox of the ledger's database, and its relay. @default none */
  readonly outbox?: OncemqOutboxOptions<Tx>;
  /** Settings every consumer of the module starts from. @default none: the pipeline's defaults */
  readonly consumerDefaults?: OncemqConsumerDefaults;
  /**
   * Where the module, its consumers' pipelines and its relay write log lines: `console`, a pino
   * logger, or anything with debug/info/warn/error. @default silent
   */
  readonly logger?: LoggerLike;
}

/** Options of `OncemqModule.forRoot`. */
export interface OncemqModuleOptions<Tx = unknown> extends OncemqModuleConfig<Tx> {
  /**
   * Name of this module instance: an application with several brokers or databases calls `forRoot`
   * once per name; tokens (`getLedgerToken(name)`) and consumers (`moduleName`) pick theirs by it.
   * @default 'default'
   */
  readonly name?: string;
  /** Makes the ledger, transport, outbox and relay injectable in every module. @default true */
  readonly global?: boolean;
}

/** Options of `OncemqModule.forRootAsync`: the configuration comes from a factory with injections. */
export interface OncemqModuleAsyncOptions<Tx = unknown> {
  /** @default 'default' */
  readonly name?: string;
  /** @default true */
  readonly global?: boolean;
  /** Modules whose providers the factory injects (a database module, `ConfigModule`). */
  readonly imports?: (Type | DynamicModule | Promise<DynamicModule> | ForwardReference)[];
  /** What the factory is called with, in order. */
  readonly inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** Builds the module's configuration. */
  readonly useFactory: (...args: never[]) => OncemqModuleConfig<Tx> | Promise<OncemqModuleConfig<Tx>>;
  /** Providers added to the module, for the factory to inject. @default none */
  readonly extraProviders?: Provider[];
}

/** `@OncemqConsumer(options)`: the consumer group, its topics and the pipeline's settings. */
export interface OncemqConsumerOptions<T = unknown> extends Omit<
  PipelineConfig<unknown, T>,
  'ledger' | 'handler' | 'batchHandler' | 'outbox'
> {
  /** Topics the group consumes. */
  readonly topics: string | readonly string[];
  /** How the transport subscribes (concurrency, visibility, ordering). @default the transport's */
  readonly subscribe?: SubscribeOptions;
  /** The `name` of the `OncemqModule` whose ledger and transport the consumer runs on. @default 'default' */
  readonly moduleName?: string;
  /**
   * Gives the handler `ctx.outbox`: the module's outbox, written in the claim's transaction.
   * @default true when the module has an outbox on its ledger and the consumer runs in transactional mode
   */
  readonly outbox?: boolean;
}

/** Defaults of the module's options. */
export const DEFAULT_ONCEMQ_MODULE_OPTIONS = Object.freeze({
  /** The module instance's name, the one consumers and `@Inject…()` without a name use. */
  name: DEFAULT_ONCEMQ_NAME,
  /** The providers are injectable in every module, as `TypeOrmModule`'s and `BullModule`'s are. */
  global: true,
} as const);
