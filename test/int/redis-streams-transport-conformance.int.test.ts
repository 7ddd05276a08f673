import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { REDIS_CLIENT_KINDS, REDIS_SERVICE } from '../support/redis.js';
import { proxiedStreams } from '../support/redis-streams.js';
import { findService } from '../support/services.js';
import { streamsForeign } from '../support/foreign.js';

const service = await findService(REDIS_SERVICE);

describe.skipIf(!service.available)('Redis Streams transport', () => {
  for (const kind of REDIS_CLIENT_KINDS) {
    describeTransportConformance(`redis-streams with ${kind}`, async () => {
      const streams = await proxiedStreams(kind, service.url, { failureBackoff: '200ms' });
      return {
        transport: streams.transport,
        foreign: streamsForeign(streams.admin, streams.prefix),
        dropConnections: () => streams.dropConnections(),
        cleanup: () => streams.close(),
      };
    });
  }
});
