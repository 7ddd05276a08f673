import { createHash } from 'node:crypto';
import type { CommandArg, SendOptions, StreamConnection } from './redis-streams-connection.js';

/**
 * The Lua scripts of the stream transport. Each runs atomically on the server, so a step that must
 * never be seen half done (a copy stored and the original acked) is one script. Where a script
 * stores a copy and acks the original, the copy comes first: a script that fails midway has already
 * stored what it stored, and an ack must never precede its copy.
 */
export class StreamScript {
  readonly sha: string;

  constructor(
    readonly name: string,
    readonly lua: string,
  ) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }

  /** `EVALSHA`, falling back to `EVAL` (which caches the script) when the server does not know it. */
  async run(
    connection: StreamConnection,
    keys: readonly string[],
    args: readonly CommandArg[],
    options?: SendOptions,
  ): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args];
    try {
      return await connection.send(['EVALSHA', this.sha, ...tail], options);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return connection.send(['EVAL', this.lua, ...tail], options);
    }
  }
}

/** Is entry `id` of `stream` still pending for `consumer` in `group`? (The owner check of every settle.) */
export const OWNED = `
local function owned(stream, group, consumer, id)
  return #redis.call('XPENDING', stream, group, id, id, 1, consumer) == 1
end
`;

/** The server's clock in milliseconds: every due time is the server's, so client clocks never matter. */
export const NOW = `
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/**
 * Acks the entries still pending for this consumer. KEYS: stream. ARGV: group, consumer, ids…
 * XACK takes no consumer name, so a member whose entry was claimed by another would otherwise ack
 * the other's delivery (TRANSPORTS.md Redis #2). Returns how many were acked.
 */
export const ACK = new StreamScript(
  'ack',
  `${OWNED}
local acked = 0
for i = 3, #ARGV do
  if owned(KEYS[1], ARGV[1], ARGV[2], ARGV[i]) then
    acked = acked + redis.call('XACK', KEYS[1], ARGV[1], ARGV[i])
  end
end
return acked`,
);

/**
 * A delayed retry: stores the copy in the group's sorted set, due after the delay, then acks the
 * original. KEYS: stream, delayed set. ARGV: group, consumer, id, delay ms, fields…
 * Returns 1, or 0 when the entry is no longer this consumer's (nothing is done).
 */
export const RETRY = new StreamScript(
  'retry',
  `${OWNED}${NOW}
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return 0 end
local copy = { KEYS[1] .. '/' .. ARGV[3] }
for i = 5, #ARGV do copy[#copy + 1] = ARGV[i] end
redis.call('ZADD', KEYS[2], now() + tonumber(ARGV[4]), cmsgpack.pack(copy))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
return 1`,
);

/**
 * Moves due retries into the group's retry stream (XADD, then ZREM). KEYS: delayed set, retry
 * stream. ARGV: most to move. Returns { moved, ms until the next one is due or -1 }.
 */
export const PROMOTE = new StreamScript(
  'promote',
  `${NOW}
local t = now()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t, 'LIMIT', 0, tonumber(ARGV[1]))
for _, member in ipairs(due) do
  local copy = cmsgpack.unpack(member)
  table.remove(copy, 1)
  redis.call('XADD', KEYS[2], '*', unpack(copy))
  redis.call('ZREM', KEYS[1], member)
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = -1
if #first == 2 then wait = math.max(0, tonumber(first[2]) - t) end
return { #due, wait }`,
);

/**
 * A dead letter: stores the copy in the group's dead-letter stream, then acks the original.
 * KEYS: stream, dead-letter stream. ARGV: group, consumer, id, fields…
 * Returns 1, or 0 when the entry is no longer this consumer's (nothing is done).
 */
export const DEAD_LETTER = new StreamScript(
  'dead-letter',
  `${OWNED}
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return 0 end
redis.call('XADD', KEYS[2], '*', unpack(ARGV, 4))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
return 1`,
);

/**
 * Replays a dead letter: stores the copy in the group's retry stream, then deletes the dead letter.
 * KEYS: dead-letter stream, retry stream. ARGV: dead letter id, fields…
 * Returns 1, or 0 when the dead letter is not there (already replayed or purged).
 */
export const REPLAY = new StreamScript(
  'replay',
  `if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then return 0 end
redis.call('XADD', KEYS[2], '*', unpack(ARGV, 2))
redis.call('XDEL', KEYS[1], ARGV[1])
return 1`,
);

/**
 * The delivery counts of pending entries (0 for one no longer pending): XREADGROUP and XAUTOCLAIM
 * report none (TRANSPORTS.md Redis #3). KEYS: stream. ARGV: group, ids… Returns the counts in order.
 */
export const DELIVERY_COUNTS = new StreamScript(
  'delivery-counts',
  `local counts = {}
for i = 2, #ARGV do
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if #pending == 1 then counts[#counts + 1] = pending[1][4] else counts[#counts + 1] = 0 end
end
return counts`,
);

/**
 * Resets the idle time of an entry still pending for this consumer (XCLAIM to itself, JUSTID: the
 * delivery count stays), so that XAUTOCLAIM elsewhere leaves a long handler's entry alone.
 * KEYS: stream. ARGV: group, consumer, id. Returns 1, or 0 when the entry is no longer this consumer's.
 */
export const KEEP_ALIVE = new StreamScript(
  'keep-alive',
  `${OWNED}
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1`,
);

/**
 * Removes this consumer from the group on every stream where nothing is pending for it; a consumer
 * with pending entries stays, since XGROUP DELCONSUMER would discard them (TRANSPORTS.md Redis #5).
 * Check and delete are one script, so no entry can arrive in between. KEYS: streams. ARGV: group,
 * consumer. Returns how many streams still hold entries pending for it.
 */
export const LEAVE = new StreamScript(
  'leave',
  `local kept = 0
for _, stream in ipairs(KEYS) do
  local pending = redis.pcall('XPENDING', stream, ARGV[1], '-', '+', 1, ARGV[2])
  if type(pending) == 'table' and pending.err == nil then
    if #pending == 0 then
      redis.call('XGROUP', 'DELCONSUMER', stream, ARGV[1], ARGV[2])
    else
      kept = kept + 1
    end
  end
end
return kept`,
);

/**
 * Trims a stream of entries every group is done with and that are older than the retention: never
 * past the oldest entry pending in any group, nor past the last one any group has read (TRANSPORTS.md
 * Redis #4: trimming a pending entry loses it). KEYS: stream. ARGV: retention ms. Returns entries removed.
 */
export const TRIM = new StreamScript(
  'trim',
  `${NOW}
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local floorMs, floorSeq = now() - tonumber(ARGV[1]), 0
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
  local keep = info['last-delivered-id']
  if info['pending'] > 0 then keep = redis.call('XPENDING', KEYS[1], info['name'])[2] end
  local ms, seq = parse(keep)
  if ms < floorMs or (ms == floorMs and seq < floorSeq) then floorMs, floorSeq = ms, seq end
end
if floorMs <= 0 then return 0 end
return redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d-%d', floorMs, floorSeq))`,
);

/**
 * What is missing for `group` to consume these streams: each key that is not a stream, or has no
 * such consumer group. KEYS: streams. ARGV: group. Returns the missing keys, each with why.
 */
export const CHECK = new StreamScript(
  'check',
  `local missing = {}
for _, stream in ipairs(KEYS) do
  if redis.call('TYPE', stream).ok ~= 'stream' then
    missing[#missing + 1] = stream .. ' (no such stream)'
  else
    local found = false
    for _, group in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
      for i = 1, #group, 2 do
        if group[i] == 'name' and group[i + 1] == ARGV[1] then found = true end
      end
    end
    if not found then missing[#missing + 1] = stream .. ' (no consumer group ' .. ARGV[1] .. ')' end
  end
end
return missing`,
);
