import { errorText } from '../../core/errors.js';
import { DEFAULT_REDIS_LEDGER_CONFIG } from '../../ledger/redis/redis-ledger.js';
import { redisTtl, validatePrefix } from '../../ledger/redis/redis-record.js';
import { loadDriver } from '../stores.js';
import type { Finding } from './findings.js';
import { skipped } from './ledger-checks.js';
import type { LedgerInspector } from './ledger-doctor.js';

/** The part of a node-redis client the inspector uses. */
interface RedisReader {
  sendCommand(args: string[]): Promise<unknown>;
  connect(): Promise<unknown>;
  destroy(): void;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

export interface RedisDoctorTarget {
  readonly url: string;
  /** The ledger's key prefix (`--prefix`). @default 'oncemq' */
  readonly prefix?: string | undefined;
}

/** Most keys the size check counts before it reports "at least". */
const MAX_COUNTED_KEYS = 1_000_000;
const CONNECT_TIMEOUT_MS = 5_000;

/** `maxmemory-policy`: anything but `noeviction` may evict a claim, and an evicted claim admits a duplicate. */
export function redisPolicyFinding(policy: string, maxmemory: number): Finding {
  const detail = { 'maxmemory-policy': policy, maxmemory };
  if (policy === 'noeviction') {
    return {
      check: 'redis.maxmemory-policy',
      status: 'ok',
      summary: 'maxmemory-policy is noeviction',
      detail,
    };
  }
  const why = policy.startsWith('volatile-')
    ? 'the ledger’s keys all carry a TTL, so a volatile policy evicts them too'
    : 'an allkeys policy evicts any key';
  return {
    check: 'redis.maxmemory-policy',
    status: 'fail',
    summary: `maxmemory-policy is ${policy} (maxmemory ${maxmemory === 0 ? 'unlimited for now' : `${maxmemory} B`}): ${why}, and a claim evicted before its retention admits the next copy of its message as new — a duplicate effect`,
    fix: 'CONFIG SET maxmemory-policy noeviction (and in redis.conf); with noeviction a full Redis refuses writes, which the ledger reports as unavailable instead of forgetting keys',
    detail,
  };
}

/** Persistence: without AOF or RDB snapshots a restart forgets every claim. */
export function redisPersistenceFinding(aof: boolean, save: string): Finding {
  const detail = { appendonly: aof, save };
  if (aof || save.trim() !== '') {
    return {
      check: 'redis.persistence',
      status: 'ok',
      summary: `persistence: ${aof ? 'AOF on' : 'AOF off'}, RDB save "${save}"`,
      detail,
    };
  }
  return {
    check: 'redis.persistence',
    status: 'warn',
    summary:
      'no persistence (appendonly no, save ""): a restart forgets every claim, and redeliveries after it run again',
    fix: 'CONFIG SET appendonly yes (appendfsync everysec or always), and in redis.conf',
    detail,
  };
}

const text = (value: unknown): string =>
  Buffer.isBuffer(value) || typeof value === 'string' || typeof value === 'number' ? value.toString() : '';

/** A `CONFIG GET name` answer as a string (node-redis answers a flat array under RESP2, a map under RESP3). */
function configValue(answer: unknown, name: string): string {
  if (Array.isArray(answer)) return text(answer[1]);
  if (answer instanceof Map) return text(answer.get(name));
  return text((answer as Record<string, unknown> | null)?.[name]);
}

/** Connects to the Redis ledger's server and answers its inspector; only reading commands are sent. */
export async function openRedisInspector(target: RedisDoctorTarget): Promise<LedgerInspector> {
  const prefix = validatePrefix(target.prefix ?? DEFAULT_REDIS_LEDGER_CONFIG.prefix, '--prefix');
  const { createClient } = await loadDriver(() => import('redis'), 'redis');
  const client = createClient({
    url: target.url,
    socket: { reconnectStrategy: false, connectTimeout: CONNECT_TIMEOUT_MS },
  }) as unknown as RedisReader;
  client.on('error', () => undefined);
  await client.connect();
  const call = (...args: string[]): Promise<unknown> => client.sendCommand(args);
  const info = async (section: string): Promise<Map<string, string>> =>
    new Map(
      text(await call('INFO', section))
        .split(/\r?\n/)
        .filter((line) => line.includes(':'))
        .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1)] as const),
    );

  return {
    store: 'redis',
    location: `${target.url} prefix ${prefix}`,
    defaultRetentionMs: redisTtl(DEFAULT_REDIS_LEDGER_CONFIG.retention, 'retention'),
    retentionName: 'key TTL',
    stuckCommand: 'oncemq ledger stuck',
    schema: () =>
      Promise.resolve({
        present: true,
        finding: skipped('ledger.schema', 'a Redis ledger has no table: each claim writes its own key'),
      }),
    serverNowMs: async () => {
      const [seconds, micros] = (await call('TIME')) as unknown[];
      return Number(text(seconds)) * 1000 + Number(text(micros)) / 1000;
    },
    async size() {
      let cursor = '0';
      let keys = 0;
      do {
        const [next, found] = (await call('SCAN', cursor, 'MATCH', `${prefix}:*`, 'COUNT', '1000')) as [
          unknown,
          unknown[],
        ];
        cursor = text(next);
        keys += found.length;
      } while (cursor !== '0' && keys < MAX_COUNTED_KEYS);
      const memory = await info('memory');
      const used = Number(memory.get('used_memory') ?? 0);
      const max = Number(memory.get('maxmemory') ?? 0);
      return {
        rows: keys,
        bytes: used,
        bytesOf: 'server' as const,
        disk:
          max > 0
            ? { path: 'maxmemory', freeBytes: Math.max(0, max - used), totalBytes: max }
            : { unknown: 'maxmemory is 0: Redis grows until the host runs out of memory' },
      };
    },
    stuck: () => Promise.resolve(undefined),
    async settings() {
      const findings: Finding[] = [];
      try {
        const policy = configValue(await call('CONFIG', 'GET', 'maxmemory-policy'), 'maxmemory-policy');
        const maxmemory = Number(configValue(await call('CONFIG', 'GET', 'maxmemory'), 'maxmemory'));
        findings.push(redisPolicyFinding(policy, maxmemory));
      } catch (error) {
        findings.push(
          skipped(
            'redis.maxmemory-policy',
            `CONFIG GET is refused here (${errorText(error)}): ask the provider for noeviction`,
          ),
        );
      }
      try {
        const persistence = await info('persistence');
        const save = configValue(await call('CONFIG', 'GET', 'save'), 'save');
        findings.push(redisPersistenceFinding(persistence.get('aof_enabled') === '1', save));
      } catch (error) {
        findings.push(
          skipped('redis.persistence', `cannot read the persistence settings: ${errorText(error)}`),
        );
      }
      return findings;
    },
    close() {
      client.destroy();
      return Promise.resolve();
    },
  };
}
