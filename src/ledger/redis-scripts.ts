import { createHash } from 'node:crypto';
import type { RedisLike } from './redis-like.js';

/**
 * A Lua script run with `EVALSHA`, falling back to `EVAL` (which caches it again) when the server
 * answers `NOSCRIPT` (after a restart, a failover or `SCRIPT FLUSH`).
 */
export class RedisScript {
  readonly sha: string;

  constructor(readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(redis: RedisLike, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    try {
      return await redis.evalSha(this.sha, keys, args);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (!message.startsWith('NOSCRIPT')) throw error;
      return redis.eval(this.source, keys, args);
    }
  }
}

/** Loads the record at KEYS[1] when ARGV[1] (owner) and ARGV[2] (attempt) still hold it as PROCESSING. */
const OWNED = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.s ~= 'PROCESSING' or r.o ~= ARGV[1] or r.a ~= tonumber(ARGV[2]) then return 0 end
`;

/** Every script answers 1 when it wrote, 0 when the claim is not (or no longer) the caller's. */
export const REDIS_SCRIPTS = Object.freeze({
  /** ARGV: expected value, new value, ttl. Compare-and-set of the whole record (the claim's reclaim). */
  reclaim: new RedisScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`),
  /** ARGV: owner, attempt, lease end, now, ttl. */
  renew: new RedisScript(`${OWNED}
r.l = tonumber(ARGV[3])
r.u = tonumber(ARGV[4])
redis.call('SET', KEYS[1], cjson.encode(r), 'PX', ARGV[5])
return 1
`),
  /** ARGV: owner, attempt, now, has result ('1'/'0'), result, ttl. */
  complete: new RedisScript(`${OWNED}
r.s = 'SUCCESS'
r.l = cjson.null
r.r = cjson.null
if ARGV[4] == '1' then r.x = ARGV[5] else r.x = cjson.null end
r.u = tonumber(ARGV[3])
redis.call('SET', KEYS[1], cjson.encode(r), 'PX', ARGV[6])
return 1
`),
  /** ARGV: owner, attempt, now, remark, ttl. */
  fail: new RedisScript(`${OWNED}
r.s = 'FAIL'
r.l = cjson.null
r.r = ARGV[4]
r.u = tonumber(ARGV[3])
redis.call('SET', KEYS[1], cjson.encode(r), 'PX', ARGV[5])
return 1
`),
  /** ARGV: owner, attempt. */
  release: new RedisScript(`${OWNED}
redis.call('DEL', KEYS[1])
return 1
`),
});
