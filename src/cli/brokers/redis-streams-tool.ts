import { resolveServiceUrl } from '../connection.js';
import type { Transport } from '../../transport/transport.js';
import { RedisStreamsTransport } from '../../transport/redis-streams/redis-streams-transport.js';

/**
 * Opens the transport for the CLI's tools (`oncemq dlq --transport redis-streams`): `--url`, else
 * `ONCEMQ_REDIS_URL`, else the loopback default; the key prefix in the URL's `prefix` parameter
 * (`redis://host:6379?prefix=myapp`), else `oncemq`. Topology `check`: nothing is created, and a
 * group that never subscribed under that prefix is an error naming its stream.
 */
export async function openRedisStreamsForTool(flag: string | undefined): Promise<Transport> {
  const url = new URL(resolveServiceUrl('redis', flag).url);
  const prefix = url.searchParams.get('prefix');
  url.searchParams.delete('prefix');
  return RedisStreamsTransport.connect(url.toString(), {
    topology: 'check',
    ...(prefix === null ? {} : { prefix }),
  });
}
