import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * Cuts a connection with a reset (RST) where the socket allows one. A socket whose writable side is
 * ending cannot be reset while its shutdown is pending (libuv answers EINVAL); Node 20 then marks the
 * handle closing without closing it, and the process spins at 100% CPU when it exits, forever. Such
 * a socket is destroyed instead (its FIN may already be on its way).
 */
export function cutConnection(socket: Socket): void {
  if (socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

/** Where a {@link TcpProxy} forwards to. */
export interface TcpProxyConfig {
  /** Host of the broker or database the proxy forwards to. */
  readonly targetHost: string;
  /** Its port. */
  readonly targetPort: number;
  /** Port to listen on. @default a free one */
  readonly listenPort?: number;
  /**
   * Address to listen on: another one than loopback serves clients on another network (the end of a
   * veth link to a network namespace). @default '127.0.0.1'
   */
  readonly listenHost?: string;
  /**
   * More servers of the same service (the other nodes of a cluster): each new connection goes to the
   * next server in turn, and to the one after it when that one refuses — a balancer in front of a
   * cluster, so clients with one URL spread over the nodes and reach a surviving one. @default none
   */
  readonly moreTargets?: readonly {
    /** The server's host. */
    readonly host: string;
    /** The server's port. */
    readonly port: number;
  }[];
}

/**
 * A TCP proxy between a client and a broker or database, for fault tests: it drops every open
 * connection on demand, refuses new ones for a while, or stalls them (bytes held, connections kept
 * open) — the network failing or hanging, without stopping a service other tests share. Point the
 * client at `127.0.0.1:${proxy.port}`.
 */
export class TcpProxy {
  readonly #server: Server;
  readonly #config: TcpProxyConfig;
  readonly #pairs = new Set<readonly [Socket, Socket]>();
  #refusing = false;
  #stalled = false;
  readonly #held = new Map<Socket, { chunks: Buffer[]; keep: (chunk: Buffer) => void }>();
  /** The next target a connection goes to, when there are several. */
  #turn = 0;
  /** Connections dropped on purpose so far. */
  dropped = 0;

  private constructor(server: Server, config: TcpProxyConfig) {
    this.#server = server;
    this.#config = config;
  }

  /** Starts a proxy on 127.0.0.1 (or `listenHost`) that forwards every connection to the target. */
  static async start(config: TcpProxyConfig): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server, config);
    server.on('connection', (client) => {
      proxy.#accept(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.listenPort ?? 0, config.listenHost ?? '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return proxy;
  }

  /** The port clients connect to. */
  get port(): number {
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('the proxy is not listening');
    return address.port;
  }

  /** Open client connections. */
  get connections(): number {
    return this.#pairs.size;
  }

  #accept(client: Socket): void {
    if (this.#refusing) {
      client.destroy();
      return;
    }
    const more = this.#config.moreTargets ?? [];
    if (more.length === 0) {
      this.#join(client, connect({ host: this.#config.targetHost, port: this.#config.targetPort }));
      return;
    }
    const targets = [{ host: this.#config.targetHost, port: this.#config.targetPort }, ...more];
    const first = this.#turn++ % targets.length;
    client.pause();
    client.on('error', () => undefined);
    const dial = (tried: number): void => {
      const target = targets[(first + tried) % targets.length];
      if (tried >= targets.length || target === undefined || client.destroyed) {
        client.destroy();
        return;
      }
      const upstream = connect(target);
      const refused = (): void => {
        upstream.destroy();
        dial(tried + 1);
      };
      upstream.once('error', refused).once('connect', () => {
        upstream.off('error', refused);
        this.#join(client, upstream);
        client.resume();
      });
    };
    dial(0);
  }

  #join(client: Socket, upstream: Socket): void {
    const pair = [client, upstream] as const;
    this.#pairs.add(pair);
    const close = (): void => {
      this.#pairs.delete(pair);
      this.#held.delete(client);
      this.#held.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    if (this.#stalled) this.#hold(pair);
    else this.#flow(pair);
  }

  #flow([client, upstream]: readonly [Socket, Socket]): void {
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      const held = this.#held.get(from);
      if (held !== undefined) {
        from.removeListener('data', held.keep);
        for (const chunk of held.chunks) to.write(chunk);
        this.#held.delete(from);
      }
      from.pipe(to);
    }
  }

  /** Reads on (so that a side closing is seen) but keeps what it reads instead of forwarding it. */
  #hold([client, upstream]: readonly [Socket, Socket]): void {
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      from.unpipe(to);
      const chunks: Buffer[] = [];
      const keep = (chunk: Buffer): void => {
        chunks.push(chunk);
      };
      this.#held.set(from, { chunks, keep });
      // unpipe() paused it, and a 'data' listener does not resume a paused stream
      from.on('data', keep).resume();
    }
  }

  /** Cuts every open connection at once (both sides see a reset); new connections are accepted. */
  dropConnections(): number {
    const count = this.#pairs.size;
    for (const [client, upstream] of this.#pairs) {
      cutConnection(client);
      upstream.destroy();
    }
    this.#pairs.clear();
    this.dropped += count;
    return count;
  }

  /** While on, new connections are closed at once, as if the service were down. */
  refuse(on: boolean): void {
    this.#refusing = on;
  }

  /**
   * While on, nothing is forwarded either way and the connections stay open (new ones too): a peer
   * that stopped answering, a network that hangs. What was held flows on once it is off; a side
   * that closes meanwhile is seen, and its connection ends.
   */
  stall(on: boolean): void {
    if (this.#stalled === on) return;
    this.#stalled = on;
    for (const pair of this.#pairs) {
      if (on) this.#hold(pair);
      else this.#flow(pair);
    }
  }

  /** Drops every connection, then refuses new ones for `ms` milliseconds: an outage. */
  async outage(ms: number): Promise<void> {
    this.refuse(true);
    this.dropConnections();
    await new Promise((resolve) => setTimeout(resolve, ms));
    this.refuse(false);
  }

  /** Drops every connection and stops listening. */
  async close(): Promise<void> {
    this.refuse(true);
    this.dropConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
