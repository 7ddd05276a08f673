export { OncemqModule } from './nest/nest-module.js';
export { OncemqConsumer } from './nest/nest-consumer.js';
export type { OncemqConsumerDecorator } from './nest/nest-consumer.js';
export { DEFAULT_ONCEMQ_MODULE_OPTIONS } from './nest/nest-options.js';
export type {
  OncemqConsumerDefaults,
  OncemqConsumerOptions,
  OncemqModuleAsyncOptions,
  OncemqModuleConfig,
  OncemqModuleOptions,
  OncemqOutboxOptions,
  OncemqResource,
} from './nest/nest-options.js';
export { DEFAULT_NEST_LOGGER_CONTEXT, nestLogger } from './nest/nest-logger.js';
export {
  DEFAULT_ONCEMQ_NAME,
  getLedgerToken,
  getOncemqOptionsToken,
  getOutboxToken,
  getRelayToken,
  getTransportToken,
  InjectLedger,
  InjectOutbox,
  InjectRelay,
  InjectTransport,
  ONCEMQ_LEDGER,
  ONCEMQ_OPTIONS,
  ONCEMQ_OUTBOX,
  ONCEMQ_RELAY,
  ONCEMQ_TRANSPORT,
} from './nest/nest-tokens.js';
