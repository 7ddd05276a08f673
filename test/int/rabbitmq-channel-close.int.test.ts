// A channel or connection closed at the moment its connection drops, or while the broker or the
// network stopped answering: amqplib's close() waits for the broker's close-ok, which never comes,
// so everything awaiting the close (a topology step, an ordered member consuming again, a
// subscription closing, the transport closing) would wait forever.
import amqplib from 'amqplib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TcpProxy } from 'oncemq/testing';
import { type Logger, SILENT_LOGGER } from 'oncemq';
import { RabbitTransport } from 'oncemq/rabbitmq';
import { deleteTopology, findRabbit, scratchPrefix, throughProxy } from '../support/rabbitmq.js';
import { outcomeFor, RabbitChannel, RabbitConnection, rabbitSettings, waitFor } from '../support/internal.js';

const service = await findRabbit();

/** What `promise` came to within `ms`: its value, or 'pending'. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'pending'> {
  return Promise.race([
    promise,
    new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms)),
  ]);
}

describe.skipIf(!service.available)('RabbitMQ channel close', () => {
  let proxy: TcpProxy;
  let connection: amqplib.ChannelModel;

  beforeEach(async () => {
    const target = new URL(service.url);
    proxy = await TcpProxy.start({ targetHost: target.hostname, targetPort: Number(target.port || 5672) });
    connection = await amqplib.connect(throughProxy(service.url, proxy));
    connection.on('error', () => undefined);
  });

  afterEach(async () => {
    await proxy.close();
  });

  it('ends when the connection drops after the close was sent and before the broker answered it', async () => {
    for (let round = 0; round < 3; round++) {
      if (round > 0) {
        connection = await amqplib.connect(throughProxy(service.url, proxy));
        connection.on('error', () => undefined);
      }
      const channel = new RabbitChannel(await connection.createConfirmChannel(), SILENT_LOGGER, 'test');
      const closing = channel.close().then(() => 'closed' as const);
      // Same tick: channel.close is on the wire, its close-ok cannot have come back yet.
      proxy.dropConnections();
      expect(await within(closing, 5_000)).toBe('closed');
      expect(channel.open).toBe(false);
    }
  });

  it('still waits for the broker when nothing drops', async () => {
    const channel = new RabbitChannel(await connection.createConfirmChannel(), SILENT_LOGGER, 'test');
    await channel.close();
    expect(channel.open).toBe(false);
    await connection.close();
  });

  it('ends after the close timeout when the broker stops answering, and counts the channel closed', async () => {
    const raw = await connection.createConfirmChannel();
    const channel = new RabbitChannel(raw, SILENT_LOGGER, 'test', false, 300);
    proxy.stall(true);
    expect(
      await within(
        channel.close().then(() => 'closed' as const),
        5_000,
      ),
    ).toBe('closed');
    expect(channel.open).toBe(false);
  });
});

/** A logger keeping its warnings. */
function keepingWarnings(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const logger: Logger = { ...SILENT_LOGGER, warn: (message) => warnings.push(message) };
  return { logger, warnings };
}

describe.skipIf(!service.available)('RabbitMQ connection close', () => {
  let proxy: TcpProxy;

  beforeEach(async () => {
    const target = new URL(service.url);
    proxy = await TcpProxy.start({ targetHost: target.hostname, targetPort: Number(target.port || 5672) });
  });

  afterEach(async () => {
    await proxy.close();
  });

  it('ends after the close timeout when close-ok never comes, and destroys the socket', async () => {
    const { logger, warnings } = keepingWarnings();
    const connection = new RabbitConnection(
      rabbitSettings({ url: throughProxy(service.url, proxy), closeTimeout: '300ms', logger }),
    );
    const channel = await connection.channel('test', 5_000);
    expect(channel.open).toBe(true);
    expect(proxy.connections).toBe(1);
    proxy.stall(true);
    const started = performance.now();
    expect(
      await within(
        connection.close().then(() => 'closed' as const),
        5_000,
      ),
    ).toBe('closed');
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    expect(warnings.join('\n')).toMatch(/did not answer the connection close/);
    // Its socket is gone: the proxy, still stalled, sees the side close and ends the connection.
    for (let i = 0; i < 100 && proxy.connections > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(proxy.connections).toBe(0);
  });

  it('ends at once when the connection drops after the close was sent', async () => {
    const connection = new RabbitConnection(
      rabbitSettings({ url: throughProxy(service.url, proxy), closeTimeout: '30s' }),
    );
    await connection.channel('test', 5_000);
    const closing = connection.close().then(() => 'closed' as const);
    proxy.dropConnections();
    expect(await within(closing, 5_000)).toBe('closed');
  });

  it('closes a transport with a consumer and a publisher in bounded time while the broker stalls', async () => {
    const prefix = scratchPrefix();
    const transport = new RabbitTransport({
      url: throughProxy(service.url, proxy),
      prefix,
      exchange: prefix,
      retention: false,
      closeTimeout: '300ms',
    });
    try {
      let received = 0;
      await transport.subscribe('stalled', ['orders'], (envelope) => {
        received++;
        return Promise.resolve(outcomeFor(envelope, 'ack', 100));
      });
      await transport.publish({ topic: 'orders', key: 'one', body: {} });
      await waitFor(() => received === 1, 'the delivery', 10_000);
      proxy.stall(true);
      // cancel, channel close, publisher close, connection close: each bounded by the timeout
      expect(
        await within(
          transport.close().then(() => 'closed' as const),
          8_000,
        ),
      ).not.toBe('pending');
    } finally {
      proxy.stall(false);
      await transport.close();
      await deleteTopology(service.url, transport.declared);
    }
  });
});
