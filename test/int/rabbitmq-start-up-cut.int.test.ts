// A connection cut while a channel RPC waits for the broker's reply: amqplib fails the RPC with a
// plain Error ("Channel ended, no reply will be forthcoming"). A subscription starting (its prefetch,
// its consume) or a dead-letter tool reading (get, checkQueue) must answer it as the transport's
// error, which a caller can tell from a bug and try again; the demo's members did not, and the raw
// error ended the process. The cut is made in the same tick as the RPC is sent, so its reply cannot
// have come back: the case happens on every run.
import amqplib from 'amqplib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TransportUnavailableError, type Envelope, type Outcome } from 'oncemq';
import { RabbitTransport, type AmqpConnectionLike } from 'oncemq/rabbitmq';
import { TcpProxy } from 'oncemq/testing';
import { outcomeFor, waitFor } from '../support/internal.js';
import { deleteTopology, findRabbit, scratchPrefix, throughProxy } from '../support/rabbitmq.js';

const service = await findRabbit();

/** Channel RPCs the connection below can cut the network under. */
type Cuttable = 'prefetch' | 'consume' | 'get' | 'checkQueue' | 'bindQueue';
const CUTTABLE: readonly Cuttable[] = ['prefetch', 'consume', 'get', 'checkQueue', 'bindQueue'];

/**
 * A recovering amqplib connection through `proxy` whose channels drop every proxied connection
 * right after sending the RPC named by `cutAt` (once), or every `n`th RPC named by `cutEvery`.
 */
async function cuttingConnection(
  url: string,
  proxy: TcpProxy,
): Promise<{
  connection: AmqpConnectionLike;
  cutAt(rpc: Cuttable): void;
  cutEvery(rpc: Cuttable | undefined, n?: number): void;
  close(): Promise<void>;
}> {
  const model = await amqplib.connect(url, { recovery: { initialDelay: 50, maxDelay: 200 } });
  model.on('error', () => undefined);
  let armed: Cuttable | undefined;
  let every: { rpc: Cuttable; n: number; calls: number } | undefined;
  const connection: AmqpConnectionLike = {
    createConfirmChannel: async () => {
      const channel = await model.createConfirmChannel();
      const calls = channel as unknown as Record<Cuttable, (...args: unknown[]) => Promise<unknown>>;
      for (const rpc of CUTTABLE) {
        const original = calls[rpc].bind(channel);
        calls[rpc] = (...args) => {
          const reply = original(...args);
          if (armed === rpc) {
            armed = undefined;
            proxy.dropConnections();
          }
          if (every?.rpc === rpc && ++every.calls % every.n === 0) proxy.dropConnections();
          return reply;
        };
      }
      return channel;
    },
    close: () => model.close(),
    on: (event: string, listener: (...args: never[]) => void) =>
      model.on(event, listener as (...args: unknown[]) => void),
    removeListener: (event: string, listener: (...args: never[]) => void) =>
      model.removeListener(event, listener as (...args: unknown[]) => void),
  };
  return {
    connection,
    cutAt: (rpc) => {
      armed = rpc;
    },
    cutEvery: (rpc, n = 1) => {
      every = rpc === undefined ? undefined : { rpc, n, calls: 0 };
    },
    close: () => model.close(),
  };
}

describe.skipIf(!service.available)('RabbitMQ: a connection cut while a channel RPC waits', () => {
  let proxy: TcpProxy;
  let cutting: Awaited<ReturnType<typeof cuttingConnection>>;
  let transport: RabbitTransport;
  let prefix: string;
  const topic = 'orders';
  const group = 'shipping';

  beforeEach(async () => {
    const target = new URL(service.url);
    proxy = await TcpProxy.start({ targetHost: target.hostname, targetPort: Number(target.port || 5672) });
    cutting = await cuttingConnection(throughProxy(service.url, proxy), proxy);
    prefix = scratchPrefix();
    transport = new RabbitTransport({
      connection: cutting.connection,
      prefix,
      exchange: prefix,
      retention: false,
      reconnectDelay: '50ms',
      maxReconnectDelay: '200ms',
    });
    await transport.init();
  });

  afterEach(async () => {
    await transport.close();
    await cutting.close();
    await proxy.close();
    await deleteTopology(service.url, transport.declared);
  });

  const received: Envelope[] = [];
  const processor = (envelope: Envelope): Promise<Outcome> => {
    received.push(envelope);
    return Promise.resolve(outcomeFor(envelope, 'ack', 100));
  };

  for (const ordered of [false, true]) {
    for (const rpc of ['prefetch', 'consume'] as const) {
      it(`fails a${ordered ? 'n ordered' : ''} subscribe cut during its ${rpc} with the transport's error, and a second subscribe consumes`, async () => {
        received.length = 0;
        const options = ordered ? { ordering: {} } : {};
        cutting.cutAt(rpc);
        const failed = await transport.subscribe(group, [topic], processor, options).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(failed).toBeInstanceOf(TransportUnavailableError);
        expect(String((failed as Error).cause)).toMatch(/Channel ended|Connection closed|closed/i);
        expect(proxy.dropped).toBe(1);
        const subscription = await transport.subscribe(group, [topic], processor, options);
        await transport.publish({ topic, key: 'after-the-cut', body: {}, orderingKey: 'order-1' });
        await waitFor(() => received.length === 1, 'the message published after the cut', 15_000);
        await subscription.close();
      });
    }
  }

  it('an ordered subscribe cut every 25 bindings gets through in a few tries: no binding made before a cut is made again', async () => {
    received.length = 0;
    cutting.cutEvery('bindQueue', 25);
    let subscription: Awaited<ReturnType<typeof transport.subscribe>> | undefined;
    let failures = 0;
    // Each partition queue is bound to 16 of the 64 slots: the first tries are cut before all are bound.
    while (subscription === undefined && failures < 10) {
      try {
        subscription = await transport.subscribe(group, [topic], processor, { ordering: {} });
      } catch (error) {
        expect(error).toBeInstanceOf(TransportUnavailableError);
        failures++;
      }
    }
    cutting.cutEvery(undefined);
    expect(subscription).toBeDefined();
    expect(failures).toBeGreaterThan(0);
    // Publishes are mandatory: an unbound slot would refuse the messages of its keys.
    const keys = Array.from({ length: 1000 }, (_, i) => `order-${i}`);
    await Promise.all(keys.map((key) => transport.publish({ topic, key, body: {}, orderingKey: key })));
    await waitFor(() => received.length === keys.length, 'a message of every key', 20_000);
    await subscription?.close();
  });

  it("fails a dead-letter listing and depth cut during their get and checkQueue with the transport's error", async () => {
    const subscription = await transport.subscribe(group, [topic], processor);
    await subscription.close();
    expect(await transport.deadLetters.list({ group })).toEqual([]);
    cutting.cutAt('get');
    await expect(transport.deadLetters.list({ group })).rejects.toBeInstanceOf(TransportUnavailableError);
    expect(await transport.deadLetters.depth(group)).toBe(0);
    cutting.cutAt('checkQueue');
    await expect(transport.deadLetters.depth(group)).rejects.toBeInstanceOf(TransportUnavailableError);
    expect(proxy.dropped).toBe(2);
    expect(await transport.deadLetters.depth(group)).toBe(0);
  });
});
