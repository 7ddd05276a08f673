/**
 * The Redis Streams transport, through node-redis ≥ 5 or ioredis ≥ 5 (docs/transports/redis-streams.md).
 *
 * @module oncemq/redis-streams
 */
export {
  DEFAULT_REDIS_STREAMS_CONFIG,
  MIN_VISIBILITY_MS,
} from './transport/redis-streams/redis-streams-config.js';
export type {
  RedisStreamsSubscribeOptions,
  RedisStreamsTransportConfig,
} from './transport/redis-streams/redis-streams-config.js';
export { RedisStreamsTransport } from './transport/redis-streams/redis-streams-transport.js';
export type { StreamSubscription } from './transport/redis-streams/redis-streams-subscription.js';
export { fromIoredisStreams, fromNodeRedisStreams } from './transport/redis-streams/redis-streams-driver.js';
export type {
  IoredisStreamsClientLike,
  NodeRedisStreamsClientLike,
  StreamClientInput,
} from './transport/redis-streams/redis-streams-driver.js';
export type {
  CommandArg,
  SendOptions,
  StreamConnection,
} from './transport/redis-streams/redis-streams-connection.js';
