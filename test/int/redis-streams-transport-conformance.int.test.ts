import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { REDIS_CLIENT_KINDS, REDIS_SERVICE } from '../support/redis.js';
import { DEFAULT_REDIS_STREAMS_CONFIG, RedisStreamsTransport } from 'oncemq/redis-streams';
import { deleteKeys, proxiedStreams, rawRedis, type RawRedis } from '../support/redis-streams.js';
import { findService } from '../support/services.js';
import { streamsForeign } from '../support/foreign.js';

const service = await findService(REDIS_SERVICE);

describe.skipIf(!service.available)('Redis Streams transport', () => {
  for (const kind of REDIS_CLIENT_KINDS) {
    describeTransportConformance(`redis-streams with ${kind}`, async () => {
      const streams = await proxiedStreams(kind, service.url, { failureBackoff: '200ms' });
      const peers: RawRedis[] = [];
      const others: string[] = [];
      return {
        transport: streams.transport,
        foreign: streamsForeign(streams.admin, streams.prefix),
        dropConnections: () => streams.dropConnections(),
        // Another process of the application: its own client, straight to the server, the same prefix.
        peer: async () => {
          const client = await rawRedis(kind, service.url);
          peers.push(client);
          return new RedisStreamsTransport({
            prefix: streams.prefix,
            failureBackoff: '200ms',
            client: client.client,
          });
        },
        // Another application on the server: a key prefix of its own.
        otherNamespace: async () => {
          const client = await rawRedis(kind, service.url);
          peers.push(client);
          const prefix = `${streams.prefix}-other`;
          others.push(prefix);
          return new RedisStreamsTransport({ prefix, failureBackoff: '200ms', client: client.client });
        },
        // Another process of the application configured with another `partitions`.
        partitionCounts: {
          count: DEFAULT_REDIS_STREAMS_CONFIG.partitions,
          member: async (_topic, partitions) => {
            const client = await rawRedis(kind, service.url);
            peers.push(client);
            return new RedisStreamsTransport({
              prefix: streams.prefix,
              failureBackoff: '200ms',
              client: client.client,
              partitions,
            });
          },
        },
        cleanup: async () => {
          for (const prefix of others) await deleteKeys(streams.admin, prefix);
          await streams.close();
          for (const peer of peers) peer.close();
        },
      };
    });
  }
});
