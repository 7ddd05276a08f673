// A lost broker connection is a warning on the default logger's sink: each transport reaches its
// broker through a TCP proxy whose connections the test cuts.
import { afterEach, describe, it } from 'vitest';
import { consoleLogger } from 'oncemq';
import { NatsTransport } from 'oncemq/nats';
import { TcpProxy } from 'oncemq/testing';
import { waitUntil } from '../support/local-points.js';
import { deleteStreams, NATS_SERVICE, natsNamespace, QUICK_NATS } from '../support/nats.js';
import { findRabbit, rabbitWorld } from '../support/rabbitmq.js';
import { proxiedStreams } from '../support/redis-streams.js';
import { REDIS_SERVICE } from '../support/redis.js';
import { findService } from '../support/services.js';

const nats = await findService(NATS_SERVICE);
const rabbit = await findRabbit();
const redis = await findService(REDIS_SERVICE);

const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

function sink() {
  const lines: string[] = [];
  const logger = consoleLogger({ write: (line) => void lines.push(line) });
  return { lines, logger, saw: (pattern: RegExp) => lines.some((line) => pattern.test(line)) };
}

async function proxyTo(url: string, port: number): Promise<TcpProxy> {
  const target = new URL(url);
  const proxy = await TcpProxy.start({
    targetHost: target.hostname,
    targetPort: Number(target.port || port),
  });
  closing.push(() => proxy.close());
  return proxy;
}

describe('a lost broker connection on the default logger', () => {
  it.skipIf(!nats.available)('NATS: the loss and the reconnection', async () => {
    const out = sink();
    const proxy = await proxyTo(nats.url, 4222);
    const names = natsNamespace();
    const transport = new NatsTransport({
      ...QUICK_NATS,
      ...names,
      servers: `nats://127.0.0.1:${proxy.port}`,
      logger: out.logger,
    });
    closing.push(async () => {
      await transport.close();
      await deleteStreams(nats.url, names.streamPrefix);
    });
    await transport.init();
    proxy.dropConnections();
    await waitUntil(() => out.saw(/WARN oncemq: NATS connection lost; reconnecting/), 'the loss logged');
    await waitUntil(() => out.saw(/WARN oncemq: NATS connection back/), 'the reconnection logged');
  });

  it.skipIf(!rabbit.available)('RabbitMQ: the loss', async () => {
    const out = sink();
    const world = await rabbitWorld(rabbit.url, { logger: out.logger });
    closing.push(() => world.cleanup());
    await world.transport.init();
    world.proxy.dropConnections();
    await waitUntil(() => out.saw(/WARN oncemq: RabbitMQ connection lost; reconnecting/), 'the loss logged');
  });

  it.skipIf(!redis.available)('Redis Streams: the loss, per subscription', async () => {
    const out = sink();
    const streams = await proxiedStreams('node-redis', redis.url, { logger: out.logger });
    closing.push(() => streams.close());
    await streams.transport.subscribe('g', ['orders'], () => Promise.reject(new Error('never called')));
    await streams.dropConnections();
    await waitUntil(
      () => out.saw(/WARN oncemq: a Redis connection was lost; reading the pending entries again group=g/),
      'the loss logged',
    );
  });
});
