// A Kafka request over a raw TCP socket, enough to tell that a broker really serves clients: Metadata v4
// (still served by Kafka 4, which dropped older Fetch, OffsetCommit, CreateTopics and other versions in
// KIP-896).
import { Buffer } from 'node:buffer';
import { framedRequest } from './framed-request.js';

const METADATA = 3;
const CLIENT_ID = 'oncemq-brokers';

function frame(apiKey, apiVersion, correlationId, body) {
  const client = Buffer.from(CLIENT_ID);
  const header = Buffer.alloc(10);
  header.writeInt16BE(apiKey, 0);
  header.writeInt16BE(apiVersion, 2);
  header.writeInt32BE(correlationId, 4);
  header.writeInt16BE(client.length, 8);
  const size = Buffer.alloc(4);
  size.writeInt32BE(header.length + client.length + body.length);
  return Buffer.concat([size, header, client, body]);
}

/**
 * Sends one request (request header v1) to `host:port` and resolves the response body, after the
 * correlation id (response header v0).
 */
export async function kafkaRequest({ host, port, apiKey, apiVersion, body = Buffer.alloc(0), timeoutMs }) {
  const correlationId = Math.floor(Math.random() * 0x7fffffff);
  const request = frame(apiKey, apiVersion, correlationId, body);
  const answer = await framedRequest({ host, port, request, broker: 'Kafka', timeoutMs });
  if (answer.readInt32BE(0) !== correlationId) {
    throw new Error(`Kafka answered another correlation id on ${host}:${port}`);
  }
  return answer.subarray(4);
}

/** Metadata v4 for no topic: the brokers the cluster advertises, its id and its controller. */
export async function clusterMetadata(host, port) {
  const noTopics = Buffer.from([0, 0, 0, 0, 0]); // topics: empty array; allow_auto_topic_creation: false
  const body = await kafkaRequest({ host, port, apiKey: METADATA, apiVersion: 4, body: noTopics });
  let at = 4; // throttle_time_ms
  const string = () => {
    const length = body.readInt16BE(at);
    at += 2;
    if (length < 0) return null;
    const value = body.toString('utf8', at, at + length);
    at += length;
    return value;
  };
  const brokers = [];
  const count = body.readInt32BE(at);
  at += 4;
  for (let i = 0; i < count; i++) {
    const nodeId = body.readInt32BE(at);
    at += 4;
    const brokerHost = string();
    const brokerPort = body.readInt32BE(at);
    at += 4;
    string(); // rack
    brokers.push({ nodeId, host: brokerHost, port: brokerPort });
  }
  const clusterId = string();
  const controllerId = body.readInt32BE(at);
  return { brokers, clusterId, controllerId };
}
