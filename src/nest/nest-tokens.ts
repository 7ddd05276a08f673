import { Inject } from '@nestjs/common';

/** The name of an `OncemqModule.forRoot()` given no `name`. */
export const DEFAULT_ONCEMQ_NAME = 'default';

/**
 * Tokens are strings, not symbols or classes: an application that loads `oncemq/nest` twice (once
 * through `import`, once through `require`) still injects what the module provides.
 */
function token(kind: string, name: string | undefined): string {
  const chosen = name ?? DEFAULT_ONCEMQ_NAME;
  return chosen === DEFAULT_ONCEMQ_NAME ? `oncemq:${kind}` : `oncemq:${kind}:${chosen}`;
}

/** Token of the ledger of `OncemqModule.forRoot({ name })`. */
export function getLedgerToken(name?: string): string {
  return token('ledger', name);
}

/** Token of the transport of `OncemqModule.forRoot({ name })`. */
export function getTransportToken(name?: string): string {
  return token('transport', name);
}

/** Token of the outbox (`createOutbox`) of `OncemqModule.forRoot({ name, outbox })`. */
export function getOutboxToken(name?: string): string {
  return token('outbox', name);
}

/** Token of the relay (`createRelay`) of `OncemqModule.forRoot({ name, outbox: { relay } })`. */
export function getRelayToken(name?: string): string {
  return token('relay', name);
}

/** Token of the options `forRoot` was given (or `forRootAsync`'s factory returned). */
export function getOncemqOptionsToken(name?: string): string {
  return token('options', name);
}

/** Token of the module's runtime: its resources and consumers (internal). */
export function getOncemqRuntimeToken(name?: string): string {
  return token('runtime', name);
}

/** The default module's ledger: `@Inject(ONCEMQ_LEDGER)`, or `@InjectLedger()`. */
export const ONCEMQ_LEDGER = getLedgerToken();
/** The default module's transport: `@Inject(ONCEMQ_TRANSPORT)`, or `@InjectTransport()`. */
export const ONCEMQ_TRANSPORT = getTransportToken();
/** The default module's outbox: `@Inject(ONCEMQ_OUTBOX)`, or `@InjectOutbox()`. */
export const ONCEMQ_OUTBOX = getOutboxToken();
/** The default module's relay: `@Inject(ONCEMQ_RELAY)`, or `@InjectRelay()`. */
export const ONCEMQ_RELAY = getRelayToken();
/** The default module's options. */
export const ONCEMQ_OPTIONS = getOncemqOptionsToken();

/** Injects the ledger of the module called `name` (the default one without it). */
export const InjectLedger = (name?: string): PropertyDecorator & ParameterDecorator =>
  Inject(getLedgerToken(name));

/** Injects the transport of the module called `name`. */
export const InjectTransport = (name?: string): PropertyDecorator & ParameterDecorator =>
  Inject(getTransportToken(name));

/** Injects the outbox of the module called `name`. */
export const InjectOutbox = (name?: string): PropertyDecorator & ParameterDecorator =>
  Inject(getOutboxToken(name));

/** Injects the relay of the module called `name`. */
export const InjectRelay = (name?: string): PropertyDecorator & ParameterDecorator =>
  Inject(getRelayToken(name));
