import type {
  BeforeApplicationShutdown,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleDestroy,
} from '@nestjs/common';
import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { Mode } from '../consumer/handler-context.js';
import { createPipeline, type Pipeline } from '../consumer/pipeline.js';
import { ConfigError, errorText } from '../core/errors.js';
import type { Subscription } from '../transport/transport.js';
import { findConsumers, type ConsumerDeclaration } from './nest-discovery.js';
import type { OncemqResources } from './nest-resources.js';

/** A consumer ready to subscribe: its pipeline and where it goes. */
interface Consumer {
  readonly where: string;
  readonly group: string;
  readonly topics: readonly string[];
  readonly pipeline: Pipeline;
  readonly declaration: ConsumerDeclaration;
}

/** A running consumer. */
interface Running {
  readonly consumer: Consumer;
  readonly subscription: Subscription;
}

/** Marks a runtime among the application's providers, whichever copy of oncemq/nest made it. */
const RUNTIME_MARK = 'oncemqModuleName';

/** A copy of `source` without `keys`. */
function withoutKeys<T extends object, K extends keyof T>(source: T, keys: readonly K[]): Omit<T, K> {
  const copy: Partial<T> = { ...source };
  for (const key of keys) Reflect.deleteProperty(copy, key);
  return copy as Omit<T, K>;
}

function topicsOf(where: string, topics: unknown): readonly string[] {
  const list: unknown[] = typeof topics === 'string' ? [topics] : Array.isArray(topics) ? topics : [];
  if (list.length === 0 || !list.every((topic) => typeof topic === 'string' && topic.length > 0)) {
    throw new ConfigError(`@OncemqConsumer ${where}`, 'topics: give a topic or a non-empty list of topics');
  }
  return Object.freeze([...(list as string[])]);
}

/**
 * The life of one `OncemqModule`'s consumers and relay inside a Nest application:
 * - `onApplicationBootstrap` (every provider is built and `onModuleInit` has run): finds the
 *   `@OncemqConsumer` methods of its name, builds their pipelines (a bad setting fails here, before
 *   anything subscribes), initialises the ledger, migrates the outbox when asked, subscribes each
 *   consumer and starts the relay;
 * - `onModuleDestroy`, the first phase of `app.close()`: closes every subscription — no new
 *   deliveries; the running ones finish and are acked, retried or dead-lettered at the broker;
 * - `beforeApplicationShutdown`: stops the relay (the round in progress is published and marked);
 * - `onApplicationShutdown`, the last phase: closes the transport and ledger the module made
 *   (never the ones the application passed in).
 */
export class OncemqRuntime
  implements OnApplicationBootstrap, OnModuleDestroy, BeforeApplicationShutdown, OnApplicationShutdown
{
  readonly [RUNTIME_MARK]: string;
  readonly #resources: OncemqResources;
  readonly #discovery: DiscoveryService;
  readonly #scanner: MetadataScanner;
  #built: readonly Consumer[] = [];
  #running: Running[] = [];
  #draining: Promise<void> | undefined;

  constructor(resources: OncemqResources, discovery: DiscoveryService, scanner: MetadataScanner) {
    this[RUNTIME_MARK] = resources.name;
    this.#resources = resources;
    this.#discovery = discovery;
    this.#scanner = scanner;
  }

  async onApplicationBootstrap(): Promise<void> {
    try {
      await this.#start();
    } catch (error) {
      await this.#abandon();
      throw error;
    }
  }

  async #start(): Promise<void> {
    const consumers = this.#consumers();
    this.#built = consumers;
    const { ledger, outbox, migrateOutbox, relay, logger, name, transport, config } = this.#resources;
    if (consumers.length > 0) await ledger?.init();
    if (outbox !== undefined && migrateOutbox !== undefined) await outbox.migrate(migrateOutbox);
    for (const consumer of consumers) {
      const subscribe = { ...config.consumerDefaults?.subscribe, ...consumer.declaration.options.subscribe };
      const subscription = await transport.subscribe(
        consumer.group,
        consumer.topics,
        consumer.pipeline,
        subscribe,
      );
      this.#running.push({ consumer, subscription });
      logger.info(
        `oncemq: ${consumer.where} consumes ${consumer.topics.join(', ')} as group ${consumer.group}`,
        {
          module: name,
          transport: transport.name,
        },
      );
    }
    await relay?.start();
  }

  /**
   * After a failed bootstrap Nest runs no shutdown hook: closes the subscriptions made so far, every
   * pipeline, the relay, and what the module made, then lets the error propagate.
   */
  async #abandon(): Promise<void> {
    await this.#drain();
    for (const consumer of this.#built) consumer.pipeline.close();
    await this.onApplicationShutdown();
  }

  /** Drains every subscription: the first phase of shutdown, before any pool or client closes. */
  async onModuleDestroy(): Promise<void> {
    await this.#drain();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.#drain();
    const { relay, logger } = this.#resources;
    try {
      await relay?.stop();
    } catch (error) {
      logger.error('oncemq: the relay failed to stop', {
        module: this.#resources.name,
        error: errorText(error),
      });
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.beforeApplicationShutdown();
    try {
      await this.#resources.close();
    } catch (error) {
      this.#resources.logger.error('oncemq: closing the transport or ledger failed', {
        module: this.#resources.name,
        error: errorText(error),
      });
    }
  }

  /** Closes the subscriptions (each waits for its running deliveries to be settled), then the pipelines. */
  #drain(): Promise<void> {
    const running = this.#running;
    this.#running = [];
    const previous = this.#draining ?? Promise.resolve();
    this.#draining = previous.then(async () => {
      const { logger, name } = this.#resources;
      await Promise.all(
        running.map(async ({ consumer, subscription }) => {
          try {
            await subscription.close();
            logger.info(`oncemq: ${consumer.where} drained (group ${consumer.group})`, { module: name });
          } catch (error) {
            logger.error(`oncemq: ${consumer.where} did not drain (group ${consumer.group})`, {
              module: name,
              error: errorText(error),
            });
          } finally {
            consumer.pipeline.close();
          }
        }),
      );
    });
    return this.#draining;
  }

  /** The consumers of this module, each with its pipeline built: every setting is checked before any subscribes. */
  #consumers(): Consumer[] {
    const declarations = findConsumers(this.#discovery, this.#scanner);
    const names = new Set(this.#moduleNames());
    const unknown = declarations.find((declaration) => !names.has(declaration.moduleName));
    if (unknown !== undefined) {
      throw new ConfigError(
        `@OncemqConsumer ${unknown.where}`,
        `moduleName: no OncemqModule is named '${unknown.moduleName}' (there are: ${[...names].join(', ')})`,
      );
    }
    const consumers: Consumer[] = [];
    const byGroup = new Map<string, string>();
    try {
      for (const declaration of declarations) {
        if (declaration.moduleName !== this.#resources.name) continue;
        const consumer = this.#consumer(declaration);
        consumers.push(consumer);
        const other = byGroup.get(consumer.group);
        if (other !== undefined) {
          throw new ConfigError(
            `@OncemqConsumer ${consumer.where}`,
            `group '${consumer.group}' is already consumed by ${other} on this module: give each consumer its own group`,
          );
        }
        byGroup.set(consumer.group, consumer.where);
      }
    } catch (error) {
      for (const built of consumers) built.pipeline.close();
      throw error;
    }
    return consumers;
  }

  /** Names of the application's OncemqModules, found among its providers. */
  #moduleNames(): string[] {
    return this.#discovery
      .getProviders()
      .map(
        (wrapper) =>
          (wrapper.instance as Partial<Record<typeof RUNTIME_MARK, unknown>> | null | undefined)?.[
            RUNTIME_MARK
          ],
      )
      .filter((name): name is string => typeof name === 'string');
  }

  #consumer(declaration: ConsumerDeclaration): Consumer {
    const { where, options } = declaration;
    const { ledger, outbox, config } = this.#resources;
    if (ledger === undefined) {
      throw new ConfigError(
        `@OncemqConsumer ${where}`,
        `OncemqModule '${this.#resources.name}' has no ledger: give it one (ledger: …) to consume`,
      );
    }
    if (options.outbox === true && outbox === undefined) {
      throw new ConfigError(
        `@OncemqConsumer ${where}`,
        `outbox: OncemqModule '${this.#resources.name}' has no outbox: give it one (outbox: { … })`,
      );
    }
    const topics = topicsOf(where, options.topics);
    const defaults = withoutKeys(config.consumerDefaults ?? {}, ['subscribe']);
    const settings = withoutKeys(options, ['topics', 'subscribe', 'moduleName', 'outbox']);
    const mode: Mode =
      settings.mode ?? defaults.mode ?? (ledger.capabilities.transactional ? 'transactional' : 'leased');
    const outboxFits =
      outbox !== undefined && mode === 'transactional' && ledger.dialect?.name === outbox.dialect.name;
    const withOutbox = options.outbox ?? outboxFits;
    try {
      const pipeline = createPipeline({
        ...defaults,
        logger: config.logger,
        ...settings,
        ledger,
        handler: declaration.handler,
        outbox: withOutbox ? outbox : undefined,
      });
      return { where, group: pipeline.group, topics, pipeline, declaration };
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      throw new ConfigError(`@OncemqConsumer ${where}`, error.message, { cause: error });
    }
  }
}
