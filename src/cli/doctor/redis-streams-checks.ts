import { errorText } from '../../core/errors.js';
import { StreamKeys } from '../../transport/redis-streams/redis-streams-names.js';
import { loadDriver } from '../stores.js';
import { absentFinding, shown, unreachableFinding } from './broker-thresholds.js';
import type { BrokerTarget, DoctorSettings, Finding } from './findings.js';

/** The one command the checks send: a raw Redis command and its RESP2 reply. */
type Send = (args: string[]) => Promise<unknown>;

/**
 * A reply of names and values (CONFIG GET, XINFO) as a map: a flat `[name, value, …]` array, or the
 * object or `Map` a client decodes it to.
 */
function pairs(reply: unknown): Map<string, unknown> {
  if (reply instanceof Map) return new Map([...reply].map(([key, value]) => [shown(key), value as unknown]));
  if (reply !== null && typeof reply === 'object' && !Array.isArray(reply))
    return new Map(Object.entries(reply));
  const map = new Map<string, unknown>();
  if (!Array.isArray(reply)) return map;
  for (let i = 0; i + 1 < reply.length; i += 2) map.set(shown(reply[i]), reply[i + 1]);
  return map;
}

/** A stream entry id as a pair of numbers, compared in order; `0-0` for anything else. */
function entryId(value: unknown): readonly [bigint, bigint] {
  const match = /^(\d+)-(\d+)$/.exec(shown(value));
  return match === null ? [0n, 0n] : [BigInt(match[1] as string), BigInt(match[2] as string)];
}

const after = (a: readonly [bigint, bigint], b: readonly [bigint, bigint]): boolean =>
  a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);

/** Eviction, persistence and the group's streams of a Redis that carries Redis Streams topics. */
export async function redisStreamsFindings(
  target: BrokerTarget,
  settings: DoctorSettings,
): Promise<Finding[]> {
  const url = target.url ?? 'redis://127.0.0.1:6379';
  let client;
  try {
    const { createClient } = await loadDriver(() => import('redis'), 'redis');
    client = createClient({ url, socket: { connectTimeout: 5000, reconnectStrategy: false } });
    client.on('error', () => undefined);
    await client.connect();
  } catch (error) {
    client?.destroy();
    return [
      unreachableFinding(
        'redis-streams',
        url,
        error,
        'start Redis there, or give --broker-url redis://host:port',
      ),
    ];
  }
  try {
    const send: Send = (args) => client.sendCommand(args);
    const keys = new StreamKeys(target.prefix ?? 'oncemq');
    const streams = [
      ...(target.topic === undefined ? [] : [keys.topic(target.topic)]),
      ...(settings.group === undefined
        ? []
        : [keys.retry(settings.group), keys.delayed(settings.group), keys.deadLetters(settings.group)]),
    ];
    return [
      await evictionFinding(send, streams),
      await persistenceFinding(send),
      ...(await streamFindings(send, keys, target, settings)),
    ];
  } finally {
    client.destroy();
  }
}

/** `CONFIG GET`, or undefined where the server refuses it (managed Redis often renames CONFIG). */
async function config(send: Send, name: string): Promise<string | undefined> {
  try {
    const value = pairs(await send(['CONFIG', 'GET', name])).get(name);
    return value === undefined ? undefined : shown(value);
  } catch {
    return undefined;
  }
}

/**
 * Eviction: under memory pressure, any `allkeys-*` policy may evict a stream (every message in it
 * gone); `volatile-*` evicts only keys with a TTL, so it is safe while oncemq's keys have none.
 */
async function evictionFinding(send: Send, streams: readonly string[]): Promise<Finding> {
  const policy = await config(send, 'maxmemory-policy');
  if (policy === undefined) {
    return {
      check: 'redis-streams.maxmemory-policy',
      status: 'skip',
      summary:
        'CONFIG GET maxmemory-policy is refused here (a managed Redis): check in its console that it is noeviction',
    };
  }
  const maxmemory = Number((await config(send, 'maxmemory')) ?? 0);
  const detail = { maxmemoryPolicy: policy, maxmemory };
  const fix =
    'CONFIG SET maxmemory-policy noeviction (and in redis.conf), or a Redis of its own for the streams';
  if (policy === 'noeviction') {
    return {
      check: 'redis-streams.maxmemory-policy',
      status: 'ok',
      summary: 'maxmemory-policy is noeviction: a full Redis refuses writes, it never evicts a stream',
      detail,
    };
  }
  if (policy.startsWith('volatile-')) {
    const withTtl: string[] = [];
    for (const key of streams) if (Number(await send(['PTTL', key])) > 0) withTtl.push(key);
    if (withTtl.length > 0) {
      return {
        check: 'redis-streams.maxmemory-policy',
        status: 'fail',
        summary: `maxmemory-policy is ${policy} and ${withTtl.join(', ')} ha${withTtl.length === 1 ? 's' : 've'} a TTL: it can be evicted, with every message in it`,
        fix: `PERSIST ${withTtl.join(' ')}; better, ${fix}`,
        detail: { ...detail, keysWithTtl: withTtl },
      };
    }
    return {
      check: 'redis-streams.maxmemory-policy',
      status: 'ok',
      summary: `maxmemory-policy is ${policy}, and the streams checked have no TTL, so none is evicted`,
      detail,
    };
  }
  return {
    check: 'redis-streams.maxmemory-policy',
    status: maxmemory > 0 ? 'fail' : 'warn',
    summary:
      maxmemory > 0
        ? `maxmemory-policy is ${policy} with maxmemory ${maxmemory}: under memory pressure Redis evicts a whole stream, and every message in it is lost`
        : `maxmemory-policy is ${policy}: no maxmemory is set now, but once one is, Redis evicts whole streams`,
    fix,
    detail,
  };
}

/** Persistence: with neither RDB snapshots nor the AOF, a restart empties every stream. */
async function persistenceFinding(send: Send): Promise<Finding> {
  const appendonly = await config(send, 'appendonly');
  const save = await config(send, 'save');
  if (appendonly === undefined || save === undefined) {
    return {
      check: 'redis-streams.persistence',
      status: 'skip',
      summary: 'CONFIG GET is refused here: check persistence in the console of the Redis service',
    };
  }
  const detail = { appendonly, save, appendfsync: await config(send, 'appendfsync') };
  if (appendonly === 'yes') {
    return {
      check: 'redis-streams.persistence',
      status: 'ok',
      summary: `the AOF is on (appendfsync ${String(detail.appendfsync)}): a restart keeps the streams${detail.appendfsync === 'always' ? '' : ', less the last second or so of writes'}`,
      detail,
    };
  }
  return {
    check: 'redis-streams.persistence',
    status: 'warn',
    summary:
      save.trim() === ''
        ? 'persistence is off (no AOF, no RDB snapshots): a restart loses every message in the streams'
        : `only RDB snapshots (save ${save}): a restart loses what was published since the last snapshot`,
    fix: 'CONFIG SET appendonly yes (and in redis.conf)',
    detail,
  };
}

/** The topic's stream and the group on it: there, and not trimmed past what the group has read. */
async function streamFindings(
  send: Send,
  keys: StreamKeys,
  target: BrokerTarget,
  settings: DoctorSettings,
): Promise<Finding[]> {
  if (target.topic === undefined) {
    return [
      {
        check: 'redis-streams.stream',
        status: 'skip',
        summary: 'no --topic given: the topic stream is not checked',
      },
    ];
  }
  const stream = keys.topic(target.topic);
  if (shown(await send(['TYPE', stream])) !== 'stream') {
    return [
      absentFinding(
        'redis-streams.stream',
        `stream ${stream} (topic ${target.topic})`,
        'start the group once, or check --topic and the key prefix',
      ),
    ];
  }
  const info = pairs(await send(['XINFO', 'STREAM', stream]));
  const findings: Finding[] = [
    {
      check: 'redis-streams.stream',
      status: 'ok',
      summary: `stream ${stream} holds ${shown(info.get('length'))} entries`,
      detail: { stream, length: info.get('length') },
    },
  ];
  if (settings.group === undefined) {
    findings.push({
      check: 'redis-streams.group',
      status: 'skip',
      summary: 'no --group given: the consumer group is not checked',
    });
    return findings;
  }
  let groups: Map<string, unknown>[];
  try {
    groups = ((await send(['XINFO', 'GROUPS', stream])) as unknown[]).map(pairs);
  } catch (error) {
    return [
      ...findings,
      {
        check: 'redis-streams.group',
        status: 'skip',
        summary: `XINFO GROUPS ${stream} failed: ${errorText(error)}`,
      },
    ];
  }
  const group = groups.find((entry) => shown(entry.get('name')) === settings.group);
  if (group === undefined) {
    findings.push(
      absentFinding(
        'redis-streams.group',
        `consumer group ${settings.group} on ${stream}`,
        'start the group once, or check --group',
      ),
    );
    return findings;
  }
  findings.push(trimFinding(stream, settings.group, info, group));
  return findings;
}

/**
 * Trimming: Redis keeps no MAXLEN setting on a stream, but says (7.0+) how many entries were ever
 * added and how many of them the group has read: fewer entries left than the group has still to read
 * means entries it never read were trimmed (MAXLEN, MINID, XTRIM) or deleted, and are lost. Where the
 * group's count is unknown, the largest deleted id past its last delivered one says the same.
 */
function trimFinding(
  stream: string,
  group: string,
  info: Map<string, unknown>,
  entry: Map<string, unknown>,
): Finding {
  const deleted = info.get('max-deleted-entry-id');
  const delivered = entry.get('last-delivered-id');
  const added = info.get('entries-added');
  const read = entry.get('entries-read');
  const detail = {
    stream,
    group,
    length: info.get('length'),
    entriesAdded: added,
    entriesRead: read,
    maxDeletedEntryId: deleted,
    lastDeliveredId: delivered,
  };
  if (deleted === undefined && added === undefined) {
    return {
      check: 'redis-streams.trim',
      status: 'skip',
      summary: 'Redis before 7.0 does not say what was trimmed from a stream',
      detail,
    };
  }
  const unread = typeof read === 'number' && typeof added === 'number' ? added - read : undefined;
  const left = Number(info.get('length'));
  if (unread !== undefined && left < unread) {
    return {
      check: 'redis-streams.trim',
      status: 'fail',
      summary: `stream ${stream} holds ${left} entries but group ${group} has ${unread} still to read: ${unread - left} it never read were trimmed or deleted`,
      fix: 'stop trimming the stream with MAXLEN/MINID or XTRIM outside oncemq; the transport trims only what every group acked (its retention)',
      detail,
    };
  }
  if (after(entryId(deleted), entryId(delivered))) {
    return {
      check: 'redis-streams.trim',
      status: 'fail',
      summary: `stream ${stream} was trimmed up to ${shown(deleted)}, past what group ${group} has read (${shown(delivered)}): entries it never read are gone`,
      fix: 'stop trimming the stream with MAXLEN/MINID or XTRIM outside oncemq; the transport trims only what every group acked (its retention)',
      detail,
    };
  }
  return {
    check: 'redis-streams.trim',
    status: 'ok',
    summary: `nothing group ${group} had not read was trimmed from ${stream}`,
    detail,
  };
}
