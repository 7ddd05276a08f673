// One RocketMQ remoting request over a raw TCP socket (JSON header), enough to ask the name server for
// its cluster and routes, and a broker to create topics and subscription groups.
import { Buffer } from 'node:buffer';
import { framedRequest } from './framed-request.js';

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
export async function remotingRequest({ host, port, code, extFields = {}, body, timeoutMs }) {
  const payload = body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body));
  const fields = Object.fromEntries(Object.entries(extFields).map(([key, value]) => [key, String(value)]));
  const request = frame(code, fields, payload);
  const answer = await framedRequest({ host, port, request, broker: 'RocketMQ', timeoutMs });
  const headerLength = answer.readInt32BE(0) & 0xffffff;
  const header = JSON.parse(answer.toString('utf8', 4, 4 + headerLength));
  return { code: header.code, remark: header.remark ?? '', body: answer.toString('utf8', 4 + headerLength) };
}

/** Fails with the server's remark unless the answer is a success. */
export function expectSuccess(what, answer) {
  if (answer.code !== 0) throw new Error(`${what} failed: code ${answer.code} ${answer.remark}`);
  return answer;
}
