import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TcpProxy } from 'oncemq/testing';
import { buildPackage } from '../support/built-package.js';

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
    for (let i = 0; i < 50 && proxy.connections > 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(proxy.connections).toBe(0);
  });

  it('cuts a connection whose writable side is ending without leaving a handle that keeps the process from exiting', async () => {
    // Node 20: resetAndDestroy() on a socket with a shutdown pending fails with EINVAL and leaves its
    // handle half closed; the process then spins at exit forever. Run in a process of its own.
    const dir = mkdtempSync(join(tmpdir(), 'oncemq-cut-'));
    const script = join(dir, 'cut.mjs');
    const proxyModule = pathToFileURL(join(buildPackage().dir, 'testing', 'tcp-proxy.js')).href;
    writeFileSync(
      script,
      `import net from 'node:net';
      import { cutConnection } from ${JSON.stringify(proxyModule)};
      const server = net.createServer((socket) => socket.on('error', () => {}));
      server.listen(0, '127.0.0.1', () => {
        const client = net.connect(server.address().port, '127.0.0.1', () => {
          client.on('error', () => {});
          client.end(); // its shutdown is pending in this turn
          cutConnection(client);
          server.close();
        });
      });`,
    );
    try {
      const child = spawn(process.execPath, [script], { stdio: 'ignore' });
      const killed = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      clearTimeout(killed);
      expect(code, 'the process exits by itself (null: killed after 10 s)').toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A server that answers every connection with its own name, then closes it. */
async function namedServer(name: string): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.end(name));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port };
}

function firstAnswer(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString());
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed without an answer')));
  });
}

describe('TcpProxy in front of a cluster (moreTargets)', () => {
  it('sends each new connection to the next node, and past a node that refuses', async () => {
    const a = await namedServer('a');
    const b = await namedServer('b');
    const gone = await namedServer('gone');
    const gonePort = gone.port;
    await new Promise((resolve) => gone.server.close(resolve)); // a node that is down: refuses
    const proxy = await TcpProxy.start({
      targetHost: '127.0.0.1',
      targetPort: a.port,
      moreTargets: [
        { host: '127.0.0.1', port: gonePort },
        { host: '127.0.0.1', port: b.port },
      ],
    });
    try {
      const answers: string[] = [];
      for (let i = 0; i < 6; i++) answers.push(await firstAnswer(proxy.port));
      // turns a, gone → b, b, a, gone → b, b: every connection reached a live node, both of them
      expect(answers).toEqual(['a', 'b', 'b', 'a', 'b', 'b']);
    } finally {
      await proxy.close();
      await new Promise((resolve) => a.server.close(resolve));
      await new Promise((resolve) => b.server.close(resolve));
    }
  });
});
