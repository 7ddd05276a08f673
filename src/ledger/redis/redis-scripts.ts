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

/**
 * A script that runs one `redis.pcall` per key of KEYS (`call`, with `i` the key's index) and answers
 * per key: `none` when the reply is nil, the reply itself, or `{ error }` for that key alone.
 */
function eachKey(call: string, none: 0 | 1, step: string): RedisScript {
  return new RedisScript(`
local out = {}
for i = 1, #KEYS do
  local r = ${call}
  if r == false then
    out[i] = ${none}
  elseif type(r) == 'table' then
    out[i] = { r.err or '${step} failed' }
  else
    out[i] = r
  end
end
return out
`);
}

/** Loads the record at KEYS[1] when ARGV[1] (owner) and ARGV[2] (attempt) still hold it as PROCESSING. */
const OWNED = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.s ~= 'PROCESSING' or r.o ~= ARGV[1] or r.a ~= tonumber(ARGV[2]) then return 0 end
`;

/**
 * The owner-checked scripts answer 1 when they wrote, 0 when the claim is not (or no longer) the
 * caller's; the multi-key ones (`claimMany`, `complete`) answer one such value per key.
 */
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
  /**
   * Claims every key in KEYS like one `SET key value PX ttl NX GET` each. ARGV: value and ttl per key.
   * Answers per key: 1 when set, the value already there, or `{ error }` for that key alone.
   */
  claimMany: eachKey(
    "redis.pcall('SET', KEYS[i], ARGV[2 * i - 1], 'PX', ARGV[2 * i], 'NX', 'GET')",
    1,
    'claim',
  ),
  /**
   * Reads every key in KEYS like one `GET` each. Answers per key: the value, 0 when there is none, or
   * `{ error }` for that key alone (another Redis type).
   */
  getMany: eachKey("redis.pcall('GET', KEYS[i])", 0, 'read'),
  /**
   * Completes every key in KEYS whose record the given owner and attempt still hold as PROCESSING.
   * ARGV: now, ttl, then per key: owner, attempt, has result ('1'/'0'), result, the value the claim
   * wrote and the finished value (both '' when unknown). When the key still holds exactly the value
   * the claim wrote — same owner, attempt and lease, so still this owner's — the finished value is
   * stored as is; otherwise the record is decoded and checked field by field.
   * Answers per key: 1 written, 0 not (or no longer) the caller's, or `{ error }` for that key alone.
   */
  complete: new RedisScript(`
local now, ttl = tonumber(ARGV[1]), ARGV[2]
local out = {}
for i = 1, #KEYS do
  local j = 3 + (i - 1) * 6
  local cur = redis.pcall('GET', KEYS[i])
  if type(cur) == 'table' then
    out[i] = { cur.err or 'read failed' }
  elseif not cur then
    out[i] = 0
  elseif ARGV[j + 4] ~= '' and cur == ARGV[j + 4] then
    redis.call('SET', KEYS[i], ARGV[j + 5], 'PX', ttl)
    out[i] = 1
  else
    local ok, r = pcall(cjson.decode, cur)
    if not ok or type(r) ~= 'table' then
      out[i] = { 'the value is not an oncemq ledger record' }
    elseif r.s ~= 'PROCESSING' or r.o ~= ARGV[j] or r.a ~= tonumber(ARGV[j + 1]) then
      out[i] = 0
    else
      r.s = 'SUCCESS'
      r.l = cjson.null
      r.r = cjson.null
      if ARGV[j + 2] == '1' then r.x = ARGV[j + 3] else r.x = cjson.null end
      r.u = now
      redis.call('SET', KEYS[i], cjson.encode(r), 'PX', ttl)
      out[i] = 1
    end
  end
end
return out
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
