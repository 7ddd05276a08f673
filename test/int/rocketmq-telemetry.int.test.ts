import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SILENT_LOGGER } from 'oncemq';
import { findRocketMQ } from '../support/brokers.js';
import { ConnectProxy, routeGrpcThrough } from '../support/connect-proxy.js';
import { sleep } from '../support/points.js';
import { clientLogger, loadRocketMQDriver, parseRocketMQUrl, RocketMQAdmin } from '../support/internal.js';

const broker = await findRocketMQ();

/** Connection drops the client meets; without a whole release its streams would double with each. */
const DROPS = 6;

describe.skipIf(!broker.available)('RocketMQ telemetry streams through dropped connections', () => {
  let proxy: ConnectProxy;
  let undoRoute: () => void;
  const topic = `oncemq-telemetry-${Math.random().toString(16).slice(2, 10)}`;
  const admin = new RocketMQAdmin(parseRocketMQUrl(broker.url).nameServer);

  beforeEach(async () => {
    await admin.createTopic({ topic, queues: 1, type: 'NORMAL' });
    proxy = await ConnectProxy.start();
    undoRoute = routeGrpcThrough(proxy);
  });

  afterEach(async () => {
    undoRoute();
    await proxy.close();
    await admin.deleteTopic(topic);
  });

  it('renews a failed stream once: one new stream per dropped connection, not twice as many each time', async () => {
    const driver = await loadRocketMQDriver();
    const { endpoints } = parseRocketMQUrl(broker.url);
    const producer = driver.producer(
      {
        endpoints,
        namespace: '',
        requestTimeout: 3000,
        logger: clientLogger(SILENT_LOGGER),
        topics: [topic],
      },
      SILENT_LOGGER,
    ) as ReturnType<typeof driver.producer> & { createTelemetryStream: (...args: unknown[]) => unknown };
    let streams = 0;
    const create = producer.createTelemetryStream.bind(producer);
    producer.createTelemetryStream = (...args: unknown[]) => {
      streams++;
      return create(...args);
    };
    await producer.startup();
    try {
      for (let drop = 0; drop < DROPS; drop++) {
        const before = streams;
        while (proxy.drop() === 0) await sleep(50);
        // the client renews a failed stream one second later
        for (let waited = 0; streams === before && waited < 5000; waited += 100) await sleep(100);
        await sleep(300);
      }
      // the first stream, and one renewal per drop (doubling would be 2^DROPS - 1 = 63)
      expect(streams).toBeGreaterThanOrEqual(DROPS);
      expect(streams).toBeLessThanOrEqual(DROPS + 2);
    } finally {
      await producer.shutdown().catch(() => undefined);
    }
  }, 60_000);
});
