import { OWNED, StreamScript } from './redis-streams-scripts.js';

/**
 * The Lua scripts of ordered groups. Every read, claim and settle of an ordered member first checks,
 * on the server and in the same script, that the member still holds the partition's lease (its token
 * is the lease's value): a member that lost its lease — expired while it stalled, taken by another —
 * can neither read, nor claim, nor ack, nor dead-letter anything of that partition any more.
 */

/** Is the lease `KEYS[1]` held with token `ARGV[1]`? */
const HOLDS = `
local function holds(lease, token)
  return redis.call('GET', lease) == token
end
`;

/**
 * A publish: `XADD` to the topic's stream and, while the topic has ordered groups, the same fields to
 * the shard stream the producer picked. KEYS: topic stream, ordered groups set, shard stream.
 * ARGV: '1' for NOMKSTREAM, fields… Returns the topic stream's entry id (nil: no such stream).
 */
export const PUBLISH = new StreamScript(
  'publish',
  `local id
if ARGV[1] == '1' then
  id = redis.call('XADD', KEYS[1], 'NOMKSTREAM', '*', unpack(ARGV, 2))
else
  id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
end
if id and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('XADD', KEYS[3], '*', unpack(ARGV, 2)) end
return id`,
);

/**
 * Records an ordered group's partition count, or reads the one recorded. With a count to switch from
 * (`ARGV[2]`, the recorded one), records the new count only when no lease of the old one is held.
 * KEYS: count key, the leases of the old count… ARGV: count, count to switch from or ''.
 * Returns the count recorded after the call.
 */
export const PARTITIONS = new StreamScript(
  'partitions',
  `local recorded = redis.call('GET', KEYS[1])
if not recorded then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
if recorded == ARGV[1] or recorded ~= ARGV[2] then return recorded end
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return recorded end
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]`,
);

/**
 * One round of a member's leases: checks that the group's recorded count is the member's, then
 * renews each lease it holds and takes (`SET … PX`) each one nobody holds. KEYS: count key, leases…
 * ARGV: count, token, ms. Returns -1 when the recorded count is another, else one answer per lease:
 * 1 held by this member (renewed), 2 taken (it was free), 0 another member holds it.
 */
export const LEASES = new StreamScript(
  'leases',
  `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local answers = {}
for i = 2, #KEYS do
  local holder = redis.call('GET', KEYS[i])
  if holder == ARGV[2] then
    redis.call('PEXPIRE', KEYS[i], ARGV[3])
    answers[#answers + 1] = 1
  elseif holder then
    answers[#answers + 1] = 0
  else
    redis.call('SET', KEYS[i], ARGV[2], 'PX', ARGV[3])
    answers[#answers + 1] = 2
  end
end
return answers`,
);

/** Gives a lease up when this member holds it. KEYS: lease. ARGV: token. Returns 1 when released. */
export const RELEASE = new StreamScript(
  'release',
  `${HOLDS}
if holds(KEYS[1], ARGV[1]) then return redis.call('DEL', KEYS[1]) end
return 0`,
);

/**
 * Reads new entries of a partition's shard streams for this member, if it holds the lease.
 * KEYS: lease, streams… ARGV: token, group, consumer, count.
 * Returns {0} without the lease; {1, XREADGROUP reply}; or {2, last entry id of each stream} when
 * nothing is new (where a blocking XREAD waits from).
 */
export const ORDERED_READ = new StreamScript(
  'ordered-read',
  `${HOLDS}
if not holds(KEYS[1], ARGV[1]) then return { 0 } end
local args = { 'XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS' }
for i = 2, #KEYS do args[#args + 1] = KEYS[i] end
for i = 2, #KEYS do args[#args + 1] = '>' end
local read = redis.call(unpack(args))
if read then return { 1, read } end
local last = {}
for i = 2, #KEYS do
  local top = redis.call('XREVRANGE', KEYS[i], '+', '-', 'COUNT', 1)
  if #top == 1 then last[#last + 1] = top[1][1] else last[#last + 1] = '0-0' end
end
return { 2, last }`,
);

/**
 * Takes over every entry pending in a shard stream, whoever it is pending for (`XAUTOCLAIM`
 * min-idle-time 0), if this member holds the partition's lease: a new owner first runs what the last
 * one left. KEYS: lease, stream. ARGV: token, group, consumer, cursor, count.
 * Returns {0} without the lease, else {1, XAUTOCLAIM reply}.
 */
export const TAKE_OVER = new StreamScript(
  'take-over',
  `${HOLDS}
if not holds(KEYS[1], ARGV[1]) then return { 0 } end
return { 1, redis.call('XAUTOCLAIM', KEYS[2], ARGV[2], ARGV[3], 0, ARGV[4], 'COUNT', ARGV[5]) }`,
);

/**
 * Acks an entry, if this member holds the lease and the entry is pending for it.
 * KEYS: lease, stream. ARGV: token, group, consumer, id. Returns 1, 0 (not its entry) or -1 (no lease).
 */
export const ORDERED_ACK = new StreamScript(
  'ordered-ack',
  `${HOLDS}${OWNED}
if not holds(KEYS[1], ARGV[1]) then return -1 end
if not owned(KEYS[2], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
return redis.call('XACK', KEYS[2], ARGV[2], ARGV[4])`,
);

/**
 * Stores a dead letter and acks the entry, if this member holds the lease and the entry is pending
 * for it. KEYS: lease, stream, dead-letter stream. ARGV: token, group, consumer, id, fields…
 * Returns 1, 0 (not its entry) or -1 (no lease).
 */
export const ORDERED_DEAD_LETTER = new StreamScript(
  'ordered-dead-letter',
  `${HOLDS}${OWNED}
if not holds(KEYS[1], ARGV[1]) then return -1 end
if not owned(KEYS[2], ARGV[2], ARGV[3], ARGV[4]) then return 0 end
redis.call('XADD', KEYS[3], '*', unpack(ARGV, 5))
redis.call('XACK', KEYS[2], ARGV[2], ARGV[4])
return 1`,
);
