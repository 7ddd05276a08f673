/**
 * One RocketMQ remoting request over a fresh TCP connection (JSON header), the protocol the name
 * server and the brokers speak to `mqadmin`: enough to create and check topics and subscription
 * groups (gRPC clients never create either) and to read a queue without consuming it. The same
 * requests as `brokers/lib/rocketmq-remoting.js`, typed.
 */
import { connect } from 'node:net';
import { TransportUnavailableError } from '../../core/errors.js';
import { unreachableCause, unreachableMessage } from '../../core/unreachable.js';

/** Request codes of `org.apache.rocketmq.remoting.protocol.RequestCode` used here. */
export const RequestCode = Object.freeze({
  PULL_MESSAGE: 11,
  QUERY_CONSUMER_OFFSET: 14,
  UPDATE_CONSUMER_OFFSET: 15,
  UPDATE_AND_CREATE_TOPIC: 17,
  GET_MAX_OFFSET: 30,
  GET_MIN_OFFSET: 31,
  GET_ROUTEINFO_BY_TOPIC: 105,
  GET_BROKER_CLUSTER_INFO: 106,
  GET_ALL_TOPIC_LIST_FROM_NAMESERVER: 206,
  UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: 200,
  GET_ALL_SUBSCRIPTIONGROUP_CONFIG: 201,
  DELETE_SUBSCRIPTIONGROUP: 207,
  DELETE_TOPIC_IN_BROKER: 215,
  DELETE_TOPIC_IN_NAMESRV: 216,
});

/** Response codes of `ResponseCode` the callers tell apart. */
export const ResponseCode = Object.freeze({
  SUCCESS: 0,
  TOPIC_NOT_EXIST: 17,
  PULL_NOT_FOUND: 19,
  PULL_RETRY_IMMEDIATELY: 20,
  PULL_OFFSET_MOVED: 21,
  QUERY_NOT_FOUND: 22,
});

/** A `host:port`. */
export interface Address {
  readonly host: string;
  readonly port: number;
}

export interface RemotingRequest extends Address {
  readonly code: number;
  readonly extFields?: Readonly<Record<string, string | number | boolean>>;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** @default 5000 */
  readonly timeoutMs?: number;
}

export interface RemotingAnswer {
  readonly code: number;
  readonly remark: string;
  readonly extFields: Readonly<Record<string, string>>;
  /** Raw bytes: fastjson text for admin answers (maps with number keys are not JSON), stored messages for pulls. */
  readonly body: Buffer;
}

/** What to do when the RocketMQ name server or proxy cannot be reached. */
export const ROCKETMQ_UNREACHABLE_HINT =
  'start one there (npm run brokers -- start rocketmq, in an oncemq checkout)';

const JSON_SERIALIZE = 0;
let nextOpaque = 1;

/** `host:port` → {@link Address}. */
export function parseAddress(address: string): Address {
  const at = address.lastIndexOf(':');
  const port = Number(address.slice(at + 1));
  if (at <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new TransportUnavailableError(`RocketMQ: '${address}' is not a host:port`);
  }
  return { host: address.slice(0, at), port };
}

function frame(request: RemotingRequest): Buffer {
  const extFields = Object.fromEntries(
    Object.entries(request.extFields ?? {}).map(([name, value]) => [name, String(value)]),
  );
  const header = Buffer.from(
    JSON.stringify({
      code: request.code,
      language: 'JAVA',
      version: 0,
      opaque: nextOpaque++,
      flag: 0,
      extFields,
    }),
  );
  const body = request.body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(request.body));
  const prefix = Buffer.alloc(8);
  prefix.writeInt32BE(4 + header.length + body.length, 0);
  prefix.writeInt32BE((JSON_SERIALIZE << 24) | header.length, 4);
  return Buffer.concat([prefix, header, body]);
}

function exchange(request: RemotingRequest): Promise<Buffer> {
  const { host, port } = request;
  const timeoutMs = request.timeoutMs ?? 5000;
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let received = Buffer.alloc(0);
    const fail = (error: Error): void => {
      socket.destroy();
      const down = unreachableCause(error);
      reject(
        new TransportUnavailableError(
          down === undefined
            ? `RocketMQ at ${host}:${port}: ${error.message}`
            : unreachableMessage({
                server: 'RocketMQ',
                url: `${host}:${port}`,
                detail: down.message,
                hint: ROCKETMQ_UNREACHABLE_HINT,
              }),
          { cause: error },
        ),
      );
    };
    socket.setTimeout(timeoutMs, () => fail(new Error(`no answer in ${timeoutMs} ms`)));
    socket.once('error', fail);
    socket.once('connect', () => socket.write(frame(request)));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return;
      socket.destroy();
      resolve(received.subarray(4, 4 + received.readInt32BE(0)));
    });
    socket.once('close', () => fail(new Error('the connection closed without an answer')));
  });
}

/** Sends one request and resolves the answer; `code` 0 is success. */
export async function remotingRequest(request: RemotingRequest): Promise<RemotingAnswer> {
  const answer = await exchange(request);
  const headerLength = answer.readInt32BE(0) & 0xffffff;
  const header = JSON.parse(answer.toString('utf8', 4, 4 + headerLength)) as {
    code: number;
    remark?: string;
    extFields?: Record<string, string>;
  };
  return {
    code: header.code,
    remark: header.remark ?? '',
    extFields: header.extFields ?? {},
    body: answer.subarray(4 + headerLength),
  };
}

/** Fails with the server's remark unless the answer is a success. */
export function expectSuccess(what: string, answer: RemotingAnswer): RemotingAnswer {
  if (answer.code !== ResponseCode.SUCCESS) {
    throw new TransportUnavailableError(`RocketMQ: ${what} failed: code ${answer.code} ${answer.remark}`);
  }
  return answer;
}
