export { DEFAULT_TIERED_LEDGER_CONFIG, TieredLedger } from './ledger/tiered/tiered-ledger.js';
export type { TieredCacheMetrics, TieredLedgerConfig } from './ledger/tiered/tiered-ledger.js';
export { CircuitBreaker } from './ledger/tiered/circuit-breaker.js';
export { fromIoredis, fromNodeRedis, toRedisLike } from './ledger/redis/redis-like.js';
export type {
  IoredisLike,
  NodeRedisClientLike,
  RedisClientInput,
  RedisLike,
} from './ledger/redis/redis-like.js';
