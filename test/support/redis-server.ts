import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connect, createServer } from 'node:net';
import { sleep } from './points.js';

const run = promisify(execFile);

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

  private constructor(
    readonly port: number,
    private readonly extraArgs: readonly string[],
  ) {}

  /** Starts a server; `extraArgs` go to `redis-server` after the port and persistence settings. */
  static async start(extraArgs: readonly string[] = []): Promise<OwnRedisServer> {
    const server = new OwnRedisServer(await freePort(), extraArgs);
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
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        ...this.extraArgs,
      ],
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

/**
 * A private Redis Cluster of `size` masters on spare loopback ports, slots spread by
 * `redis-cli --cluster create`; ready once every node reports `cluster_state:ok`.
 */
export class OwnRedisCluster {
  private constructor(
    readonly nodes: readonly OwnRedisServer[],
    private readonly dir: string,
  ) {}

  static async start(size = 3): Promise<OwnRedisCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'oncemq-cluster-'));
    const nodes: OwnRedisServer[] = [];
    try {
      for (let i = 0; i < size; i++) {
        nodes.push(
          await OwnRedisServer.start([
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            join(dir, `nodes-${i}.conf`),
            '--dir',
            dir,
          ]),
        );
      }
      const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
      await run('redis-cli', [
        '--cluster',
        'create',
        ...addresses,
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ]);
      for (const node of nodes) {
        for (let i = 0; ; i++) {
          const { stdout } = await run('redis-cli', ['-p', String(node.port), 'cluster', 'info']);
          if (stdout.includes('cluster_state:ok')) break;
          if (i > 200) throw new Error(`the cluster node on ${node.port} never reported cluster_state:ok`);
          await sleep(25);
        }
      }
    } catch (error) {
      await Promise.all(nodes.map((node) => node.stop()));
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
    return new OwnRedisCluster(nodes, dir);
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
