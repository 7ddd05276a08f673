import type { ConnectProxy } from 'oncemq/testing';

export { ConnectProxy } from 'oncemq/testing';

/**
 * Sends every gRPC channel this test process opens from now on through `proxy` (grpc-js reads
 * `grpc_proxy` when it makes a channel; loopback targets are not exempt). Returns the undo.
 */
export function routeGrpcThrough(proxy: ConnectProxy): () => void {
  const before = process.env.grpc_proxy;
  process.env.grpc_proxy = proxy.url;
  return () => {
    if (before === undefined) delete process.env.grpc_proxy;
    else process.env.grpc_proxy = before;
  };
}
