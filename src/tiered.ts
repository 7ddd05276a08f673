export { DEFAULT_TIERED_LEDGER_CONFIG, TieredLedger } from './ledger/tiered-ledger.js';
export type { TieredCacheMetrics, TieredLedgerConfig } from './ledger/tiered-ledger.js';
export { CircuitBreaker } from './ledger/circuit-breaker.js';
export { fromIoredis, fromNodeRedis, toRedisLike } from './ledger/redis-like.js';
export type { IoredisLike, NodeRedisClientLike, RedisClientInput, RedisLike } from './ledger/redis-like.js';
