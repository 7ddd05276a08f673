// One RocketMQ remoting request over a raw TCP socket (JSON header), enough to ask the name server for
// its cluster and routes, and a broker to create topics and subscription groups.
import { Buffer } from 'node:buffer';
import { connect } from 'node:net';

/** Request codes of org.apache.rocketmq.remoting.protocol.RequestCode used here. */
export const RequestCode = Object.freeze({
  UPDATE_AND_CREATE_TOPIC: 17,
  GET_ROUTEINFO_BY_TOPIC: 105,
  GET_BROKER_CLUSTER_INFO: 106,
  UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: 200,
});

const JSON_SERIALIZE = 0;
let nextOpaque = 1;

function frame(code, extFields, body) {
  const header = Buffer.from(
    JSON.stringify({ code, language: 'JAVA', version: 0, opaque: nextOpaque++, flag: 0, extFields }),
  );
  const prefix = Buffer.alloc(8);
  prefix.writeInt32BE(4 + header.length + body.length, 0);
  prefix.writeInt32BE((JSON_SERIALIZE << 24) | header.length, 4);
  return Buffer.concat([prefix, header, body]);
}

/**
 * Sends one request to `host:port` and resolves `{ code, remark, body }`; `code` 0 is success. The body
 * is left as text: the server writes fastjson, whose maps with number keys are not JSON.
 */
export function remotingRequest({ host, port, code, extFields = {}, body, timeoutMs = 5000 }) {
  const payload = body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body));
  const fields = Object.fromEntries(Object.entries(extFields).map(([key, value]) => [key, String(value)]));
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let received = Buffer.alloc(0);
    const fail = (error) => {
      socket.destroy();
      reject(error);
    };
    socket.setTimeout(timeoutMs, () =>
      fail(new Error(`no RocketMQ answer from ${host}:${port} in ${timeoutMs} ms`)),
    );
    socket.once('error', fail);
    socket.once('connect', () => socket.write(frame(code, fields, payload)));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return;
      socket.destroy();
      const length = received.readInt32BE(0);
      const headerLength = received.readInt32BE(4) & 0xffffff;
      const header = JSON.parse(received.toString('utf8', 8, 8 + headerLength));
      resolve({
        code: header.code,
        remark: header.remark ?? '',
        body: received.toString('utf8', 8 + headerLength, 4 + length),
      });
    });
    socket.once('close', () => reject(new Error(`${host}:${port} closed the connection without an answer`)));
  });
}

/** Fails with the server's remark unless the answer is a success. */
export function expectSuccess(what, answer) {
  if (answer.code !== 0) throw new Error(`${what} failed: code ${answer.code} ${answer.remark}`);
  return answer;
}
