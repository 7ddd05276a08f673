import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { sleep } from './points.js';

/** A free loopback port, as the OS hands it out. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address === null || typeof address === 'string') reject(new Error('no port'));
        else resolve(address.port);
      });
    });
  });
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => {
      resolve(false);
    });
  });
}

/**
 * A private `redis-server` on a spare loopback port, without persistence, that a fault test may stop,
 * start and flush at will (the machine's shared Redis on 6379 is never touched).
 */
export class OwnRedisServer {
  #child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  static async start(): Promise<OwnRedisServer> {
    const server = new OwnRedisServer(await freePort());
    await server.start();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    if (this.#child !== undefined) return;
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    this.#child = child;
    for (let i = 0; i < 100; i++) {
      if (await answers(this.port)) return;
      if (child.exitCode !== null) break;
      await sleep(20);
    }
    throw new Error(`redis-server did not start on port ${this.port}`);
  }

  /** Kills this server (only the process this object started) and waits for it to exit. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child === undefined) return;
    this.#child = undefined;
    if (child.exitCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGKILL');
      await exited;
    }
  }
}
