/**
 * The Redis ledger (leased mode only), through node-redis ≥ 5 or ioredis ≥ 5 (docs/ledgers/redis.md).
 *
 * @module oncemq/redis
 */
export { DEFAULT_REDIS_LEDGER_CONFIG, RedisLedger } from './ledger/redis/redis-ledger.js';
export type { RedisLedgerConfig } from './ledger/redis/redis-ledger.js';
export { fromIoredis, fromNodeRedis } from './ledger/redis/redis-like.js';
export type {
  IoredisLike,
  NodeRedisClientLike,
  RedisClientInput,
  RedisLike,
} from './ledger/redis/redis-like.js';
