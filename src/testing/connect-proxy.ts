import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';

/**
 * An HTTP CONNECT proxy for gRPC clients (grpc-js tunnels every channel through `grpc_proxy`): the
 * RocketMQ proxy's routes name its own address, so a plain TCP proxy in front of the endpoint would
 * carry only the first route query; through this one every call goes, and {@link drop} cuts them all.
 */
export class ConnectProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();

  private constructor(server: Server) {
    this.#server = server;
  }

  /** Starts a proxy on a free port of 127.0.0.1. */
  static async start(): Promise<ConnectProxy> {
    const server = createServer((_, response) => response.writeHead(405).end());
    const proxy = new ConnectProxy(server);
    server.on('connect', (request: IncomingMessage, client: Socket, head: Buffer) => {
      proxy.#tunnel(request, client, head);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** The proxy's URL (`http://127.0.0.1:<port>`), for the client's `grpc_proxy`. */
  get url(): string {
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('the proxy is not listening');
    return `http://127.0.0.1:${address.port}`;
  }

  #tunnel(request: IncomingMessage, client: Socket, head: Buffer): void {
    const [host = '', port = ''] = (request.url ?? '').split(':');
    const upstream = connect({ host, port: Number(port) });
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket);
      socket.on('error', () => socket.destroy());
      socket.on('close', () => this.#sockets.delete(socket));
    }
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }

  /** Cuts every tunnel open now; the clients connect again through the proxy. Returns how many. */
  drop(): number {
    const count = this.#sockets.size;
    for (const socket of this.#sockets) socket.destroy();
    return count;
  }

  /** Cuts every tunnel and stops listening. */
  async close(): Promise<void> {
    this.drop();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
