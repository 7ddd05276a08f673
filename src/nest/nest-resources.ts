import { ConfigError } from '../core/errors.js';
import { toLogger, type Logger } from '../core/logger.js';
import type { Ledger } from '../ledger/ledger.js';
import { createOutbox, type Outbox } from '../outbox/outbox.js';
import type { OutboxDatabase } from '../outbox/outbox-database.js';
import { createRelay, type Relay } from '../outbox/relay.js';
import type { Transport } from '../transport/transport.js';
import { nestLogger } from './nest-logger.js';
import type { OncemqModuleConfig, OncemqResource } from './nest-options.js';

/** A ledger or transport and whether the module made it (and so closes it). */
interface Held<T> {
  readonly value: T;
  readonly owned: boolean;
}

/** What one `OncemqModule` runs on: its ledger, transport, outbox and relay, resolved from its configuration. */
export interface OncemqResources<Tx = unknown> {
  readonly name: string;
  readonly transport: Transport;
  readonly ledger: Ledger<Tx> | undefined;
  readonly outbox: Outbox<Tx> | undefined;
  readonly relay: Relay<Tx> | undefined;
  /** Where `outbox.migrate` runs at bootstrap, when configured. */
  readonly migrateOutbox: OutboxDatabase | undefined;
  readonly config: OncemqModuleConfig<Tx>;
  /** Where the module's own lines go: the configured `logger`, else Nest's `Logger`. */
  readonly logger: Logger;
  /** Whether the module made the transport / the ledger (a function was given): it closes those. */
  readonly owns: { readonly transport: boolean; readonly ledger: boolean };
  /** Closes what the module made: the transport, then the ledger. What the application passed stays open. */
  close(): Promise<void>;
}

const hasMethods = (value: unknown, methods: readonly string[]): boolean =>
  typeof value === 'object' &&
  value !== null &&
  methods.every((method) => typeof (value as Record<string, unknown>)[method] === 'function');

async function hold<T>(
  field: string,
  given: OncemqResource<T> | undefined,
  methods: readonly string[],
  what: string,
): Promise<Held<T> | undefined> {
  if (given === undefined) return undefined;
  const owned = typeof given === 'function';
  const value = owned ? await (given as () => T | Promise<T>)() : given;
  if (!hasMethods(value, methods)) {
    throw new ConfigError(
      field,
      owned
        ? `the function must return ${what}`
        : `expected ${what}, or a function that creates one (the module then closes it at shutdown)`,
    );
  }
  return { value, owned };
}

const TRANSPORT_METHODS = ['publish', 'subscribe', 'close'];
const LEDGER_METHODS = ['init', 'transaction', 'claim', 'close'];

/**
 * Resolves a module's configuration: calls the functions that create a transport or ledger (the
 * module's to close), takes the instances as they are (the application's), and makes the outbox
 * and relay. If a step fails, what the module already made is closed before the error propagates.
 */
export async function openResources<Tx>(
  name: string,
  config: OncemqModuleConfig<Tx>,
): Promise<OncemqResources<Tx>> {
  if (typeof config !== 'object' || (config as unknown) === null) {
    throw new ConfigError('options', 'OncemqModule needs { transport, ledger?, outbox? }');
  }
  const logger = config.logger === undefined ? nestLogger() : toLogger(config.logger);
  const made: Held<{ close(): Promise<void> }>[] = [];
  try {
    const transport = await hold<Transport>(
      'transport',
      config.transport,
      TRANSPORT_METHODS,
      'a transport (RabbitTransport, NatsTransport …)',
    );
    if (transport === undefined) {
      throw new ConfigError('transport', 'OncemqModule needs a transport, or a function that creates one');
    }
    made.push(transport);
    const ledger = await hold<Ledger<Tx>>(
      'ledger',
      config.ledger,
      LEDGER_METHODS,
      'a ledger (PostgresLedger, an ORM ledger …)',
    );
    if (ledger !== undefined) made.push(ledger);
    const { migrate, relay: relayOptions, ...outboxConfig } = config.outbox ?? {};
    if (config.outbox !== undefined && outboxConfig.dialect === undefined && ledger === undefined) {
      throw new ConfigError(
        'outbox',
        "lives in the module's ledger's database: give a SQL ledger, or a dialect",
      );
    }
    const outbox =
      config.outbox === undefined
        ? undefined
        : createOutbox<Tx>(
            outboxConfig.dialect === undefined ? { ...outboxConfig, ledger: ledger?.value } : outboxConfig,
          );
    const relay =
      outbox === undefined || relayOptions === undefined
        ? undefined
        : createRelay<Tx>({
            logger: toLogger(config.logger),
            ...relayOptions,
            outbox,
            transport: transport.value,
          });
    let closing: Promise<void> | undefined;
    return {
      name,
      transport: transport.value,
      ledger: ledger?.value,
      outbox,
      relay,
      migrateOutbox: migrate,
      config,
      logger,
      owns: { transport: transport.owned, ledger: ledger?.owned ?? false },
      close() {
        closing ??= closeOwned(made);
        return closing;
      },
    };
  } catch (error) {
    await closeOwned(made).catch(() => undefined);
    throw error;
  }
}

/** Closes, in order, the resources the module made; every one is tried, the first failure is thrown. */
async function closeOwned(held: readonly Held<{ close(): Promise<void> }>[]): Promise<void> {
  const failures: unknown[] = [];
  for (const { value, owned } of held) {
    if (!owned) continue;
    try {
      await value.close();
    } catch (error) {
      failures.push(error);
    }
  }
  if (failures.length > 0) throw failures[0];
}
