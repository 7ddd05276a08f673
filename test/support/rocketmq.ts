import { randomUUID } from 'node:crypto';
import { RocketMQTransport, type RocketMQTransportConfig } from 'oncemq/rocketmq';
import type { TransportFactory } from 'oncemq/conformance';

type TransportUnderTest = Awaited<ReturnType<TransportFactory>>;

/**
 * Settings that keep the tests quick: the shortest long poll the local proxy allows (1 s,
 * brokers/rocketmq/rmq-proxy.json), a short failure backoff.
 */
export const QUICK_ROCKETMQ: RocketMQTransportConfig = Object.freeze({
  longPoll: '1s',
  failureBackoff: '1s',
  requestTimeout: '3s',
});

/**
 * A RocketMQ transport for one conformance case. No `dropConnections`: the proxy's routes name its own
 * gRPC address (127.0.0.1:8081), so after the first route query the client talks to the proxy
 * directly and a TCP proxy in front of the endpoint sees only that first query.
 */
export function rocketmqUnderTest(
  url: string,
  config: RocketMQTransportConfig = {},
): Promise<TransportUnderTest> {
  return Promise.resolve({
    transport: new RocketMQTransport({ url, ...QUICK_ROCKETMQ, ...config }),
    // Another process of the application: a client of its own on the same proxy.
    peer: () => Promise.resolve(new RocketMQTransport({ url, ...QUICK_ROCKETMQ, ...config })),
    // Another application on the cluster: a namespace of its own.
    otherNamespace: () =>
      Promise.resolve(
        new RocketMQTransport({
          url,
          ...QUICK_ROCKETMQ,
          ...config,
          namespace: `ns${randomUUID().slice(0, 8)}`,
        }),
      ),
  });
}
