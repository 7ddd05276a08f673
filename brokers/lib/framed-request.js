// One request and its answer over a fresh TCP connection, for the protocols whose frames start with
// their length as a 4-byte big-endian integer (Kafka's and RocketMQ's remoting).
import { Buffer } from 'node:buffer';
import { connect } from 'node:net';

/** Writes `request` to `host:port` and resolves the first answer frame, without its length prefix. */
export function framedRequest({ host, port, request, broker, timeoutMs = 5000 }) {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let received = Buffer.alloc(0);
    const fail = (error) => {
      socket.destroy();
      reject(error);
    };
    socket.setTimeout(timeoutMs, () =>
      fail(new Error(`no ${broker} answer from ${host}:${port} in ${timeoutMs} ms`)),
    );
    socket.once('error', fail);
    socket.once('connect', () => socket.write(request));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return;
      socket.destroy();
      resolve(received.subarray(4, 4 + received.readInt32BE(0)));
    });
    socket.once('close', () => reject(new Error(`${host}:${port} closed the connection without an answer`)));
  });
}
