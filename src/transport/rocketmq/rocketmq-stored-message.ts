/**
 * Reads stored messages the way RocketMQ's `MessageDecoder` writes them in a pull answer, so that the
 * dead-letter queue can be listed without consuming it (a pull that commits no offset).
 */
import { inflateSync } from 'node:zlib';
import { TransportUnavailableError } from '../../core/errors.js';

/** One message as the broker stored it. */
export interface StoredMessage {
  readonly queueId: number;
  readonly queueOffset: number;
  readonly storedAt: Date;
  readonly bornAt: Date;
  /** RocketMQ's `reconsumeTimes` of the copy. */
  readonly reconsumeTimes: number;
  readonly topic: string;
  readonly properties: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
}

const MAGIC_V2 = -626843477;
const COMPRESSED = 0x1;
const BORN_HOST_V6 = 0x1 << 4;
const STORE_HOST_V6 = 0x1 << 5;
const NAME_VALUE = '\u0001';
const PROPERTY = '\u0002';

function properties(text: string): Record<string, string> {
  const result: Record<string, string> = {};
  for (const pair of text.split(PROPERTY)) {
    const at = pair.indexOf(NAME_VALUE);
    if (at > 0) result[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return result;
}

/** Decodes every message of a pull answer's body. */
export function decodeStoredMessages(buffer: Buffer): StoredMessage[] {
  const messages: StoredMessage[] = [];
  let at = 0;
  while (at + 4 <= buffer.length) {
    const size = buffer.readInt32BE(at);
    if (size <= 0 || at + size > buffer.length) {
      throw new TransportUnavailableError(`RocketMQ: a stored message at byte ${at} is cut short`);
    }
    let p = at + 4;
    const magic = buffer.readInt32BE(p);
    p += 4 + 4; // magic, body CRC
    const queueId = buffer.readInt32BE(p);
    p += 4 + 4; // queue id, flag
    const queueOffset = Number(buffer.readBigInt64BE(p));
    p += 8 + 8; // queue offset, physical offset
    const sysFlag = buffer.readInt32BE(p);
    p += 4;
    const bornAt = new Date(Number(buffer.readBigInt64BE(p)));
    p += 8 + ((sysFlag & BORN_HOST_V6) === 0 ? 8 : 20);
    const storedAt = new Date(Number(buffer.readBigInt64BE(p)));
    p += 8 + ((sysFlag & STORE_HOST_V6) === 0 ? 8 : 20);
    const reconsumeTimes = buffer.readInt32BE(p);
    p += 4 + 8; // reconsume times, prepared transaction offset
    const bodyLength = buffer.readInt32BE(p);
    p += 4;
    let body: Uint8Array = buffer.subarray(p, p + bodyLength);
    if ((sysFlag & COMPRESSED) !== 0) body = inflateSync(body);
    p += bodyLength;
    const topicLength = magic === MAGIC_V2 ? buffer.readInt16BE(p) : buffer.readInt8(p);
    p += magic === MAGIC_V2 ? 2 : 1;
    const topic = buffer.toString('utf8', p, p + topicLength);
    p += topicLength;
    const propertiesLength = buffer.readInt16BE(p);
    p += 2;
    messages.push({
      queueId,
      queueOffset,
      storedAt,
      bornAt,
      reconsumeTimes,
      topic,
      properties: properties(buffer.toString('utf8', p, p + propertiesLength)),
      body: Uint8Array.from(body),
    });
    at += size;
  }
  return messages;
}
