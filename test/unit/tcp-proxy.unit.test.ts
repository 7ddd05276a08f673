import { createServer, connect, type Server } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TcpProxy } from 'oncemq/testing';

/** An echo server on a free loopback port. */
async function echoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port };
}

function roundTrip(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => socket.write(text));
    socket.once('data', (data) => {
      socket.end();
      resolve(data.toString());
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before an answer')));
  });
}

describe('TcpProxy', () => {
  let echo: { server: Server; port: number };
  let proxy: TcpProxy;

  beforeEach(async () => {
    echo = await echoServer();
    proxy = await TcpProxy.start({ targetHost: '127.0.0.1', targetPort: echo.port });
  });

  afterEach(async () => {
    await proxy.close();
    await new Promise((resolve) => echo.server.close(resolve));
  });

  it('forwards bytes both ways', async () => {
    expect(await roundTrip(proxy.port, 'ping')).toBe('ping');
  });

  it('drops open connections on demand, and accepts new ones after', async () => {
    const socket = connect({ host: '127.0.0.1', port: proxy.port });
    await new Promise((resolve) => socket.once('connect', resolve));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.on('error', () => undefined);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(proxy.dropConnections()).toBe(1);
    await closed;
    expect(await roundTrip(proxy.port, 'again')).toBe('again');
  });

  it('refuses new connections while refusing', async () => {
    proxy.refuse(true);
    await expect(roundTrip(proxy.port, 'x')).rejects.toThrow();
    proxy.refuse(false);
    expect(await roundTrip(proxy.port, 'y')).toBe('y');
  });

  it('holds bytes while stalled, keeping the connection open, and lets them through after', async () => {
    const socket = connect({ host: '127.0.0.1', port: proxy.port });
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.on('error', () => undefined);
    const answers: string[] = [];
    socket.on('data', (data) => answers.push(data.toString()));
    await new Promise((resolve) => setTimeout(resolve, 20));
    proxy.stall(true);
    socket.write('held');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(answers).toEqual([]);
    expect(proxy.connections).toBe(1);
    proxy.stall(false);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(answers.join('')).toBe('held');
    socket.destroy();
  });

  it('sees a side close while stalled, and ends its connection', async () => {
    const socket = connect({ host: '127.0.0.1', port: proxy.port });
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.on('error', () => undefined);
    await new Promise((resolve) => setTimeout(resolve, 20));
    proxy.stall(true);
    socket.write('held');
    socket.destroy();
    for (let i = 0; i < 50 && proxy.connections > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(proxy.connections).toBe(0);
  });
});
