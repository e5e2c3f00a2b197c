/**
 * The Lua scripts, one per multi-step change, registered with ioredis `defineCommand` (which
 * sends EVALSHA and falls back to EVAL once per connection). Every KEYS and ARGV slot is named.
 * Redis runs a script alone, so each one is atomic across every gateway instance; each touches
 * only keys of one account's hash tag, so each runs on one Cluster node.
 *
 * Times are epoch milliseconds, exact in Lua's doubles. HMGET gives `false` for absent fields.
 */

/**
 * Consumes a refresh token and stores its successor, or recognises a duplicate or a reuse.
 *
 * KEYS[1] the presented token     <prefix>:rt:{acct}:<tokenId>
 * KEYS[2] its family              <prefix>:fam:{acct}:<familyId>
 * KEYS[3] the successor token     <prefix>:rt:{acct}:<successorId>
 * KEYS[4] the account's resets    <prefix>:reset:{acct}
 * ARGV[1] family id named by the presented handle
 * ARGV[2] key id named by the presented handle
 * ARGV[3] hex SHA-256 of the presented secret
 * ARGV[4] now
 * ARGV[5] grace window in ms (a duplicate strictly sooner than this gets the pair back)
 * ARGV[6] successor token id
 * ARGV[7] hex SHA-256 of the successor's secret
 * ARGV[8] successor idle expiry (capped here at the family's expiry)
 * ARGV[9] the successor pair, sealed under the presented secret
 * ARGV[10] the family's granted scopes as the presented handle names them ('' for none): a
 *          family whose stored grant differs is invalid, so a handle edited to drop its
 *          narrowing gets nothing (an older gateway sends no ARGV[10]: read as '')
 * ARGV[11] the thumbprint of the refresh's DPoP proof ('' without one): a family bound to a
 *          DPoP key (its `jkt`) is refreshed only with a proof by it (RFC 9449 §5); an unbound
 *          family rotated with one is bound to it from then on
 * Returns {'rotated'} | {'replayed', sealedPair} | {'reused'} | {'invalid'} | {'dpop_mismatch'}
 *
 * The sealed pair is kept on the family, not on the consumed token: only the latest rotation's
 * pair can ever be handed back (a duplicate needs its successor to be the family's current
 * token), while a consumed token stays until its family ends, a month of a kilobyte per
 * refresh for something usable for seconds. A token consumed by an earlier version still holds
 * its own pair, which wins: during a rolling upgrade the family's may be an older rotation's.
 */
export const ROTATE = `
local t = redis.call('HMGET', KEYS[1], 'fam', 'key', 'hash', 'exp', 'rot', 'next', 'sealed')
if not t[3] or t[3] ~= ARGV[3] or t[1] ~= ARGV[1] or t[2] ~= ARGV[2] then return {'invalid'} end
local f = redis.call('HMGET', KEYS[2], 'exp', 'created', 'revoked', 'current', 'sealed', 'scope')
local now = tonumber(ARGV[4])
local famExp = tonumber(f[1])
if not famExp or f[3] or famExp <= now then return {'invalid'} end
if (f[6] or '') ~= (ARGV[10] or '') then return {'invalid'} end
local r = redis.call('HMGET', KEYS[4], 'account', 'key:' .. ARGV[2])
local created = tonumber(f[2])
if (r[1] and tonumber(r[1]) >= created) or (r[2] and tonumber(r[2]) >= created) then return {'invalid'} end
local jkt = redis.call('HGET', KEYS[2], 'jkt')
local proof = ARGV[11] or ''
if jkt and jkt ~= proof then return {'dpop_mismatch'} end
if not t[5] then
  if tonumber(t[4]) <= now then return {'invalid'} end
  local exp = math.min(tonumber(ARGV[8]), famExp)
  redis.call('HSET', KEYS[3], 'fam', ARGV[1], 'key', ARGV[2], 'hash', ARGV[7], 'exp', exp)
  redis.call('PEXPIREAT', KEYS[3], exp)
  -- The consumed token stays until its family ends, so that a late reuse is recognised.
  redis.call('HSET', KEYS[1], 'rot', ARGV[4], 'next', ARGV[6])
  redis.call('PEXPIREAT', KEYS[1], famExp)
  redis.call('HSET', KEYS[2], 'current', ARGV[6], 'sealed', ARGV[9])
  if not jkt and proof ~= '' then redis.call('HSET', KEYS[2], 'jkt', proof) end
  return {'rotated'}
end
if now - tonumber(t[5]) < tonumber(ARGV[5]) and f[4] == t[6] then return {'replayed', t[7] or f[5]} end
redis.call('HSET', KEYS[2], 'revoked', '1')
return {'reused'}
`;

/**
 * Starts a family with its first token.
 *
 * KEYS[1] the family              <prefix>:fam:{acct}:<familyId>
 * KEYS[2] the first token         <prefix>:rt:{acct}:<tokenId>
 * ARGV[1] family id
 * ARGV[2] key id
 * ARGV[3] now (the family's start, compared with resets)
 * ARGV[4] the family's absolute expiry
 * ARGV[5] token id
 * ARGV[6] hex SHA-256 of the token's secret
 * ARGV[7] the token's idle expiry (capped at the family's)
 * ARGV[8] the family's granted scopes, space-separated ('' for none: the key's own at each refresh)
 * ARGV[9] the DPoP key thumbprint the family is bound to ('' for none)
 */
export const CREATE_FAMILY = `
local famExp = tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'exp', famExp, 'created', ARGV[3], 'key', ARGV[2], 'current', ARGV[5])
if ARGV[8] and ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'scope', ARGV[8]) end
if ARGV[9] and ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'jkt', ARGV[9]) end
redis.call('PEXPIREAT', KEYS[1], famExp)
local exp = math.min(tonumber(ARGV[7]), famExp)
redis.call('HSET', KEYS[2], 'fam', ARGV[1], 'key', ARGV[2], 'hash', ARGV[6], 'exp', exp)
redis.call('PEXPIREAT', KEYS[2], exp)
return 1
`;

/**
 * Ends a refresh-token family (RFC 7009 §2.1), on behalf of whoever holds one of its tokens:
 * the presented token (consumed or not) must match its family, key and secret digest, as in
 * ROTATE. Nothing else of the family changes, so reuse detection and its fields stay as they are.
 *
 * KEYS[1] the presented token     <prefix>:rt:{acct}:<tokenId>
 * KEYS[2] its family              <prefix>:fam:{acct}:<familyId>
 * ARGV[1] family id named by the presented handle
 * ARGV[2] key id named by the presented handle
 * ARGV[3] hex SHA-256 of the presented secret
 * Returns 1 when the family was live and is now revoked, 0 otherwise (unknown, wrong secret,
 * already revoked or gone).
 */
export const REVOKE_FAMILY = `
local t = redis.call('HMGET', KEYS[1], 'fam', 'key', 'hash')
if not t[3] or t[3] ~= ARGV[3] or t[1] ~= ARGV[1] or t[2] ~= ARGV[2] then return 0 end
local f = redis.call('HMGET', KEYS[2], 'exp', 'revoked')
if not f[1] or f[2] then return 0 end
redis.call('HSET', KEYS[2], 'revoked', '1')
return 1
`;

/**
 * What introspection (RFC 7662) says of a refresh token: its record and its family's, read in
 * one step, once the presented secret's digest matched. Changes nothing.
 *
 * KEYS[1] the presented token     <prefix>:rt:{acct}:<tokenId>
 * KEYS[2] its family              <prefix>:fam:{acct}:<familyId>
 * KEYS[3] the account's resets    <prefix>:reset:{acct}
 * ARGV[1] family id named by the presented handle
 * ARGV[2] key id named by the presented handle
 * ARGV[3] hex SHA-256 of the presented secret
 * Returns {} when the token is unknown or the secret does not match, else
 * {token exp, consumed (0/1), family exp or false, family created or false, revoked (0/1), latest reset or 0}.
 */
export const INSPECT_TOKEN = `
local t = redis.call('HMGET', KEYS[1], 'fam', 'key', 'hash', 'exp', 'rot')
if not t[3] or t[3] ~= ARGV[3] or t[1] ~= ARGV[1] or t[2] ~= ARGV[2] then return {} end
local f = redis.call('HMGET', KEYS[2], 'exp', 'created', 'revoked')
local r = redis.call('HMGET', KEYS[3], 'account', 'key:' .. ARGV[2])
local reset = math.max(tonumber(r[1] or '0'), tonumber(r[2] or '0'))
return {t[4], t[5] and 1 or 0, f[1], f[2], f[3] and 1 or 0, tostring(reset)}
`;

/**
 * Adds a revoked access token to the deny list, unless the list is at its bound, and announces
 * it. Expired entries go first, so the bound counts live ones only.
 *
 * KEYS[1] the deny list           <prefix>:denied   (sorted set: jti, score = expiry)
 * ARGV[1] the token's jti
 * ARGV[2] its expiry (epoch ms)
 * ARGV[3] now
 * ARGV[4] most live entries
 * ARGV[5] the channel             <prefix>:denied-tokens
 * ARGV[6] the announcement (JSON)
 * Returns 1 added, 2 already there (the later expiry kept), 0 full (nothing written).
 */
export const DENY_TOKEN = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
local known = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not known and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
-- The later expiry wins (by hand: ZADD GT needs Redis 6.2).
if not known or tonumber(known) < tonumber(ARGV[2]) then redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1]) end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
redis.call('PUBLISH', ARGV[5], ARGV[6])
if known then return 2 end
return 1
`;

/**
 * Records a reset (the later time wins), keeps it as long as a token from before it can live,
 * and announces it on the reset channel.
 *
 * KEYS[1] the account's resets    <prefix>:reset:{acct}
 * ARGV[1] field: 'account' or 'key:<keyId>'
 * ARGV[2] the reset's time
 * ARGV[3] how long to keep the record, in ms
 * ARGV[4] the reset channel
 * ARGV[5] the announcement (JSON)
 */
export const RESET = `
local at = tonumber(ARGV[2])
local current = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if at > current then redis.call('HSET', KEYS[1], ARGV[1], at) end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
`;

/**
 * One page of an account's roles in id order, and how many there are, read in Redis so that a
 * big account's roles never travel to the gateway whole. With a name to search for, the roles
 * are walked in id order in chunks and their JSON decoded for `name`; letters compare without
 * case (ASCII letters only: Lua's string.lower).
 *
 * KEYS[1] the role index          <prefix>:roles:{acct}   (sorted set of ids, score = id)
 * KEYS[2] the roles               <prefix>:role:{acct}    (hash: id → JSON)
 * ARGV[1] offset (0-based)
 * ARGV[2] limit
 * ARGV[3] text the name must contain ('' for every role)
 * Returns {total, id, json, id, json, …}, json false when the index names a role the hash lacks;
 * {-1, id} when a role's name cannot be read while searching.
 */
export const ROLES_PAGE = `
local offset, limit, needle = tonumber(ARGV[1]), tonumber(ARGV[2]), string.lower(ARGV[3])
if needle == '' then
  local out = {redis.call('ZCARD', KEYS[1])}
  local ids = redis.call('ZRANGE', KEYS[1], offset, offset + limit - 1)
  if #ids == 0 then return out end
  local records = redis.call('HMGET', KEYS[2], unpack(ids))
  for i = 1, #ids do out[#out + 1] = ids[i]; out[#out + 1] = records[i] end
  return out
end
local out, total, start, chunk = {0}, 0, 0, 500
while true do
  local ids = redis.call('ZRANGE', KEYS[1], start, start + chunk - 1)
  if #ids == 0 then break end
  local records = redis.call('HMGET', KEYS[2], unpack(ids))
  for i = 1, #ids do
    local ok, role = pcall(cjson.decode, records[i] or 'null')
    local name = ok and type(role) == 'table' and role.name
    -- A number is a name too (directory-records.ts reads it as text).
    if type(name) == 'number' then name = tostring(name) end
    if type(name) ~= 'string' then return {-1, ids[i]} end
    if string.find(string.lower(name), needle, 1, true) then
      if total >= offset and total < offset + limit then out[#out + 1] = ids[i]; out[#out + 1] = records[i] end
      total = total + 1
    end
  end
  start = start + chunk
end
out[1] = total
return out
`;

/**
 * Reads the epoch record, making it when there is none (state/revocation/store.ts): whoever comes
 * first sets the start, and every instance racing it reads that same start back.
 *
 * KEYS[1] the epoch record        <prefix>:epoch
 * ARGV[1] now: the start of a new epoch, if none exists
 * Returns {start, made (1 when this call made the record, else 0)}
 */
export const EPOCH = `
local start = redis.call('GET', KEYS[1])
if start then return {start, 0} end
redis.call('SET', KEYS[1], ARGV[1])
return {ARGV[1], 1}
`;

/**
 * Counts hits, each in every window of its subject or in none (state/rate-counters/store.ts),
 * in the order given: a later hit on the same subject sees the earlier ones.
 * state/rate-counters/redis.ts sends the hits and refunds of one event-loop turn in one call,
 * one round trip and one script run for all (a lone hit is a batch of one); on a Cluster all
 * keys must share a slot, so there a call holds one subject's hits. Each window is a counter
 * whose TTL is the rest of the window: set with the first unit, kept by INCRBY, so a window
 * ends when its key expires.
 *
 * KEYS         the windows of hit 1, then those of hit 2, …   <prefix>:rl:{<subject>}:<ms>
 * ARGV, per hit in turn: n (its number of windows), cost (> 0: a hit; < 0: a refund, only into
 *              open windows, never below 0, a window refunded to 0 deleted; 0: a look), the n
 *              limits, the n lengths in ms
 * Returns, per hit in turn: admitted (1|0), count_1, resetsInMs_1, …, count_n, resetsInMs_n
 */
export const RATE_HIT_BATCH = `
local out = {}
local k, a = 0, 0
while a < #ARGV do
  local n = tonumber(ARGV[a + 1])
  local cost = tonumber(ARGV[a + 2])
  local counts, ttls = {}, {}
  local room = 1
  for i = 1, n do
    local key = KEYS[k + i]
    local ttl = redis.call('PTTL', key)
    local count = 0
    if ttl > 0 then count = tonumber(redis.call('GET', key)) else ttl = tonumber(ARGV[a + 2 + n + i]) end
    counts[i] = count
    ttls[i] = ttl
    if cost > 0 and count + cost > tonumber(ARGV[a + 2 + i]) then room = 0 end
  end
  if cost > 0 and room == 1 then
    for i = 1, n do
      if counts[i] == 0 then
        redis.call('SET', KEYS[k + i], cost, 'PX', ttls[i])
      else
        redis.call('INCRBY', KEYS[k + i], cost)
      end
      counts[i] = counts[i] + cost
    end
  elseif cost < 0 then
    for i = 1, n do
      if counts[i] > 0 then
        counts[i] = math.max(0, counts[i] + cost)
        -- A window back at 0 holds nothing worth keeping: deleted, so that a refused or given-back
        -- attempt leaves no key behind (the next unit opens a new window, as on a fresh subject).
        if counts[i] == 0 then
          redis.call('DEL', KEYS[k + i])
          ttls[i] = tonumber(ARGV[a + 2 + n + i])
        else
          redis.call('SET', KEYS[k + i], counts[i], 'KEEPTTL')
        end
      end
    end
  end
  out[#out + 1] = room
  for i = 1, n do
    out[#out + 1] = counts[i]
    out[#out + 1] = ttls[i]
  end
  k = k + n
  a = a + 2 + 2 * n
end
return out
`;

/**
 * Adds one account's usage counts to its buckets (state/usage/redis.ts), five-minute ones and
 * days, and keeps each bucket touched for its retention. The number of keys goes first in the call.
 *
 * KEYS[i]          a bucket of the account: first the five-minute ones
 *                  <prefix>:usage:{acct}:<bucketStartSeconds>, then the days
 *                  <prefix>:usage-day:{acct}:<dayStartSeconds>
 * ARGV[1]          how long a five-minute bucket is kept after this write, in ms
 * ARGV[2]          how long a day is kept after this write, in ms
 * ARGV[3]          how many of KEYS are five-minute buckets (the rest are days)
 * ARGV[4 + 3j]     index i of the bucket (into KEYS) of the j-th count
 * ARGV[5 + 3j]     its field: `r:<keyId>` (calls), `l:<keyId>` (rate-limited calls) or
 *                  `1:<keyId>` … `5:<keyId>` (calls answered 1xx … 5xx)
 * ARGV[6 + 3j]     the amount to add (> 0)
 * Returns the number of counts added.
 */
export const USAGE_ADD = `
for j = 4, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[tonumber(ARGV[j])], ARGV[j + 1], ARGV[j + 2])
end
local buckets = tonumber(ARGV[3])
for i = 1, #KEYS do
  if i <= buckets then redis.call('PEXPIRE', KEYS[i], ARGV[1]) else redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
end
return (#ARGV - 3) / 3
`;

/**
 * Records a key's sign-in time unless a later one is recorded already (instances whose writes
 * cross keep the latest), and keeps the account's hash for the retention from now.
 *
 * KEYS[1]   the account's last sign-ins     <prefix>:key-use:{acct}
 * ARGV[1]   the key id (the field)
 * ARGV[2]   the sign-in's time, epoch ms
 * ARGV[3]   the retention, ms (PEXPIRE)
 * Returns 1 when written, 0 when a later time was there.
 */
export const KEY_USE_RECORD = `
local current = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local written = 0
if current < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  written = 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return written
`;

/**
 * Sums the fields of one account's buckets per group (a window's steps: up to 289 five-minute
 * buckets, or 31 days), so a read is one call whatever the window. The number of keys goes first.
 *
 * KEYS[i]   a bucket of the account   <prefix>:usage:{acct}:<s> or <prefix>:usage-day:{acct}:<s>
 * ARGV[i]   the group (step) KEYS[i] is summed into, a number
 * Returns {group_1, field_1, sum_1, group_2, field_2, sum_2, …} over every field present in any
 * bucket of the group.
 */
export const USAGE_SUM = `
local sums, order = {}, {}
for i = 1, #KEYS do
  local g = ARGV[i]
  local h = redis.call('HGETALL', KEYS[i])
  for j = 1, #h, 2 do
    local k = g .. ' ' .. h[j]
    if sums[k] == nil then
      sums[k] = 0
      order[#order + 1] = {g, h[j], k}
    end
    sums[k] = sums[k] + tonumber(h[j + 1])
  end
end
local out = {}
for _, o in ipairs(order) do
  out[#out + 1] = o[1]
  out[#out + 1] = o[2]
  out[#out + 1] = sums[o[3]]
end
return out
`;

// The owner store's scripts (owner-store.redis.ts). Each changes one account's slot (`{acct}`)
// together with its audit events and the notice on the directory channel, so a change is
// recorded and announced exactly when it is made. Audit events are stream entries with one field,
// `e` (the event JSON), trimmed to exactly the newest ARGV `maxlen` (an exact MAXLEN evicts one
// entry per event added: cheap at these sizes, and the cap is then the documented one).

/** Appends the events ARGV[from..] to the stream `key`, keeping the newest `maxlen`. */
const AUDIT_FN = `
local function audit(key, maxlen, from)
  for i = from, #ARGV do redis.call('XADD', key, 'MAXLEN', maxlen, '*', 'e', ARGV[i]) end
end
`;

/**
 * `decoded(json, where)`: the object in `json`, or an error reply `BADDATA <where> …` when
 * cjson cannot read it (the \udc00 escape of a lone surrogate, say), which client.ts turns into
 * BadStoreData naming it. Never read as absent: an account whose doc cjson could not read was
 * answered "No such account." and a role's unreadable slug clashed with nothing (issue 26).
 *
 * `live(key, member)`: whether the account hash `key` holds an account that is not deleted: a
 * role or sign record written after the deletion (which took them all) would outlive it. With
 * `member` (an owner id; '' for an operator's write), also whether that owner is still one of
 * its members: their removal may have come between the gateway's check and this write.
 */
const LIVE_FN = `
local function decoded(json, where)
  local ok, value = pcall(cjson.decode, json)
  if not ok or type(value) ~= 'table' then error({err = 'BADDATA ' .. where .. ' cannot be decoded by Redis'}) end
  return value
end
local function live(key, member)
  local doc = redis.call('HGET', key, 'doc')
  if not doc then return false end
  local account = decoded(doc, key)
  if account.deletedAt ~= nil then return false end
  if member == nil or member == '' then return true end
  if type(account.members) ~= 'table' then return false end
  for _, m in ipairs(account.members) do
    if type(m) == 'table' and m.ownerId == member then return true end
  end
  return false
end
`;

/**
 * Writes the sign-in records of an account's keys (key-directory.redis.ts reads them through
 * the pointers outside the slot): KEYS[first…] the records, ARGV[from…] one each, the record's
 * fields as a JSON array of field, value, … ('' for a deleted key: a tombstone `gone`, which
 * reads as no key while a pointer still leads to it). Each record is replaced whole.
 */
const KEY_RECORDS_FN = `
local function keyRecords(first, from, count)
  for i = 0, count - 1 do
    local key, fields = KEYS[first + i], ARGV[from + i]
    redis.call('DEL', key)
    if fields == '' then redis.call('HSET', key, 'gone', '1') else redis.call('HSET', key, unpack(cjson.decode(fields))) end
  end
end
`;

/**
 * Creates an account with its keys' sign-in records, unless the id is taken (a deleted account
 * keeps its id). The number of keys goes first in the call: 2 plus one per key.
 *
 * KEYS[1] the account             <prefix>:acct:{acct}     (hash: doc, v, keysInSlot)
 * KEYS[2] its audit stream        <prefix>:audit:{acct}
 * KEYS[3…] its keys' records      <prefix>:akey:{acct}:<keyId>
 * ARGV[1] the AccountDoc JSON
 * ARGV[2] audit events kept (maxlen)
 * ARGV[3] the directory channel
 * ARGV[4] the notice ({"kind":"account","accountId"})
 * ARGV[5] the keys channel        <prefix>:keys
 * ARGV[6] its notice              {"accountId"}
 * ARGV[7…] one per key record: its fields (KEY_RECORDS_FN); then the audit events (JSON each)
 * Returns 1 when created, 0 when the id is taken.
 */
export const OWNER_CREATE_ACCOUNT = AUDIT_FN + KEY_RECORDS_FN + `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'v', 1, 'keysInSlot', '1')
local records = #KEYS - 2
keyRecords(3, 7, records)
audit(KEYS[2], ARGV[2], 7 + records)
redis.call('PUBLISH', ARGV[3], ARGV[4])
if records > 0 then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1
`;

/**
 * Stores a changed account if nobody changed it since it was read (its version), with its
 * events and the sign-in records of the keys the change touched, in one step: no reader ever
 * sees the account changed and its keys not (a gateway dying after this script leaves nothing
 * that signs in against it). An account deleted by this change loses its roles and sign
 * records here too. The number of keys goes first in the call: 5 plus one per key record.
 *
 * KEYS[1] the account             <prefix>:acct:{acct}     (hash: doc, v, keysInSlot)
 * KEYS[2] its audit stream        <prefix>:audit:{acct}
 * KEYS[3] its role index          <prefix>:roles:{acct}
 * KEYS[4] its roles               <prefix>:role:{acct}
 * KEYS[5] its sign records        <prefix>:sign:{acct}
 * KEYS[6…] key records written    <prefix>:akey:{acct}:<keyId>
 * ARGV[1] the version the change was made from
 * ARGV[2] the new AccountDoc JSON
 * ARGV[3] '1' when this change deletes the account (roles and sign records go), else '0'
 * ARGV[4] audit events kept (maxlen)
 * ARGV[5] the directory channel
 * ARGV[6] the notice ({"kind":"account","accountId"})
 * ARGV[7] the keys channel        <prefix>:keys
 * ARGV[8] its notice              {"accountId"}
 * ARGV[9] '1' when the records are every key's (the account's first change since records moved
 *         into its slot: `keysInSlot` is set), else '0'
 * ARGV[10…] one per key record: its fields (KEY_RECORDS_FN); then the audit events (JSON each)
 * Returns the new version; 0 when there is no account; -1 when its version moved (read again).
 */
export const OWNER_UPDATE_ACCOUNT = AUDIT_FN + KEY_RECORDS_FN + `
local v = redis.call('HGET', KEYS[1], 'v')
if not v then return 0 end
if v ~= ARGV[1] then return -1 end
local next = tonumber(v) + 1
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'v', next)
if ARGV[9] == '1' then redis.call('HSET', KEYS[1], 'keysInSlot', '1') end
if ARGV[3] == '1' then redis.call('DEL', KEYS[3], KEYS[4], KEYS[5]) end
local records = #KEYS - 5
keyRecords(6, 10, records)
audit(KEYS[2], ARGV[4], 10 + records)
redis.call('PUBLISH', ARGV[5], ARGV[6])
if records > 0 then redis.call('PUBLISH', ARGV[7], ARGV[8]) end
return next
`;

/**
 * Records events that change nothing else, if the account exists.
 *
 * KEYS[1] the account             <prefix>:acct:{acct}
 * KEYS[2] its audit stream        <prefix>:audit:{acct}
 * ARGV[1] audit events kept (maxlen)
 * ARGV[2…] audit events (JSON each)
 * Returns 1, or 0 when there is no account.
 */
export const OWNER_APPEND_AUDIT = AUDIT_FN + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
audit(KEYS[2], ARGV[1], 2)
return 1
`;

/**
 * Creates a role or replaces one (possibly under another id), in the layout of
 * directory.redis.ts. Ids and slugs are unique within the account: checked against the role
 * hash itself, since roles imported by other writers have no slug index. A role whose JSON
 * cannot be read is an error (BADDATA), not a role without a slug.
 *
 * KEYS[1] the account             <prefix>:acct:{acct}
 * KEYS[2] the role index          <prefix>:roles:{acct}    (sorted set of ids, score = id)
 * KEYS[3] the roles               <prefix>:role:{acct}     (hash: id → JSON)
 * KEYS[4] the audit stream        <prefix>:audit:{acct}
 * ARGV[1] the role's id (decimal)
 * ARGV[2] its slug
 * ARGV[3] its JSON
 * ARGV[4] the id of the role it replaces ('' to create)
 * ARGV[5] audit events kept (maxlen)
 * ARGV[6] the directory channel
 * ARGV[7] the notice ({"kind":"roles","accountId"})
 * ARGV[8] the owner the write is made for, who must be a member ('' for an operator)
 * ARGV[9…] audit events (JSON each)
 * Returns 'ok', 'id_taken', 'slug_taken' or 'not_found' (no account, a deleted one, not the
 * owner's, or nothing to replace).
 */
export const OWNER_PUT_ROLE = AUDIT_FN + LIVE_FN + `
if not live(KEYS[1], ARGV[8]) then return 'not_found' end
local id, slug, replaces = ARGV[1], ARGV[2], ARGV[4]
if replaces ~= '' and redis.call('HEXISTS', KEYS[3], replaces) == 0 then return 'not_found' end
if id ~= replaces and (redis.call('HEXISTS', KEYS[3], id) == 1 or redis.call('ZSCORE', KEYS[2], id)) then return 'id_taken' end
local all = redis.call('HGETALL', KEYS[3])
for i = 1, #all, 2 do
  if all[i] ~= replaces then
    local role = decoded(all[i + 1], KEYS[3] .. ' ' .. all[i])
    if role.slug ~= nil and tostring(role.slug) == slug then return 'slug_taken' end
  end
end
if replaces ~= '' then
  redis.call('ZREM', KEYS[2], replaces)
  redis.call('HDEL', KEYS[3], replaces)
end
redis.call('ZADD', KEYS[2], tonumber(id), id)
redis.call('HSET', KEYS[3], id, ARGV[3])
audit(KEYS[4], ARGV[5], 9)
redis.call('PUBLISH', ARGV[6], ARGV[7])
return 'ok'
`;

/**
 * Deletes a role.
 *
 * KEYS[1] the account             <prefix>:acct:{acct}
 * KEYS[2] the role index          <prefix>:roles:{acct}
 * KEYS[3] the roles               <prefix>:role:{acct}
 * KEYS[4] the audit stream        <prefix>:audit:{acct}
 * ARGV[1] the role's id (decimal)
 * ARGV[2] audit events kept (maxlen)
 * ARGV[3] the directory channel
 * ARGV[4] the notice ({"kind":"roles","accountId"})
 * ARGV[5] the owner the write is made for, who must be a member ('' for an operator)
 * ARGV[6…] audit events (JSON each)
 * Returns 1, or 0 when there is no such role (or account, or it is deleted, or not the owner's).
 */
export const OWNER_DELETE_ROLE = AUDIT_FN + LIVE_FN + `
if not live(KEYS[1], ARGV[5]) then return 0 end
local removed = redis.call('HDEL', KEYS[3], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
if removed == 0 then return 0 end
audit(KEYS[4], ARGV[2], 6)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`;

/**
 * Creates or replaces a sign record, in the layout of directory.redis.ts.
 *
 * KEYS[1] the account             <prefix>:acct:{acct}
 * KEYS[2] the sign records        <prefix>:sign:{acct}     (hash: lowercase address → JSON)
 * KEYS[3] the audit stream        <prefix>:audit:{acct}
 * ARGV[1] the address (lowercase)
 * ARGV[2] the record's JSON
 * ARGV[3] 'create' (the address must have no record) or 'replace' (it must have one)
 * ARGV[4] audit events kept (maxlen)
 * ARGV[5] the directory channel
 * ARGV[6] the notice ({"kind":"sign","accountId","address"})
 * ARGV[7] the owner the write is made for, who must be a member ('' for an operator)
 * ARGV[8…] audit events (JSON each)
 * Returns 'ok', 'exists' or 'not_found' (also for no account, a deleted one, or not the owner's).
 */
export const OWNER_PUT_SIGN = AUDIT_FN + LIVE_FN + `
if not live(KEYS[1], ARGV[7]) then return 'not_found' end
local present = redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1
if ARGV[3] == 'create' and present then return 'exists' end
if ARGV[3] == 'replace' and not present then return 'not_found' end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
audit(KEYS[3], ARGV[4], 8)
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 'ok'
`;

/**
 * Deletes a sign record.
 *
 * KEYS[1] the account             <prefix>:acct:{acct}
 * KEYS[2] the sign records        <prefix>:sign:{acct}
 * KEYS[3] the audit stream        <prefix>:audit:{acct}
 * ARGV[1] the address (lowercase)
 * ARGV[2] audit events kept (maxlen)
 * ARGV[3] the directory channel
 * ARGV[4] the notice ({"kind":"sign","accountId","address"})
 * ARGV[5] the owner the write is made for, who must be a member ('' for an operator)
 * ARGV[6…] audit events (JSON each)
 * Returns 1, or 0 when there is no such record (or account, or it is deleted, or not the owner's).
 */
export const OWNER_DELETE_SIGN = AUDIT_FN + LIVE_FN + `
if not live(KEYS[1], ARGV[5]) then return 0 end
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then return 0 end
audit(KEYS[3], ARGV[2], 6)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`;

/**
 * Writes a versioned document (an owner) if its version is still the one it was read at.
 *
 * KEYS[1] the document            <prefix>:owner:<ownerId>   (hash: doc, v)
 * ARGV[1] the version it was read at ('0': it must not exist yet)
 * ARGV[2] the new JSON
 * Returns the new version, or -1 when the version moved (or, for '0', the document exists).
 */
export const PUT_VERSIONED = `
local v = redis.call('HGET', KEYS[1], 'v') or '0'
if v ~= ARGV[1] then return -1 end
local next = tonumber(v) + 1
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'v', next)
return next
`;

/**
 * Sets (or deletes) an index entry only if it still holds what the caller saw: so that taking
 * over a stale entry, or releasing one's own, never undoes someone else's claim.
 *
 * KEYS[1] the index entry         <prefix>:email:<email>
 * ARGV[1] the value expected ('' for none)
 * ARGV[2] the new value ('' deletes)
 * Returns 1 when written, 0 when the entry held something else.
 */
export const SWAP_INDEX = `
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
`;

/**
 * Retires a sign-in record written outside its account's slot by a version before the records
 * moved into it (found in `<prefix>:acct-keys:{acct}`, not held by the account any more: left
 * by a gateway that died before retiring it), unless it is a pointer now (`home`): then a key
 * of the account is written through it.
 *
 * KEYS[1] the record              <prefix>:key:<keyId> or <prefix>:apikey:<apiKey>
 * ARGV[1] the keys channel        <prefix>:keys
 * ARGV[2] the notice              {"accountId"}
 * Returns 1 when deleted, 0 when it is a pointer (or absent).
 */
export const RETIRE_LEGACY_KEY = `
if redis.call('HEXISTS', KEYS[1], 'home') == 1 or redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
`;

/**
 * Moves a session's idle deadline, capped at its absolute end, and its TTL with it, and marks
 * it seen now; an ended
 * (by the deadlines and `now`, whatever its key's TTL says) or unknown session stays ended.
 *
 * KEYS[1] the session             <prefix>:sess:<digest>
 * ARGV[1] the new idle deadline (epoch ms)
 * ARGV[2] now (epoch ms, the gateway's clock, which also set the deadlines)
 * Returns 1, or 0 when there is no session (or it has ended: it is deleted).
 */
export const SESSION_TOUCH = `
local ends = tonumber(redis.call('HGET', KEYS[1], 'expiresAt'))
local was = tonumber(redis.call('HGET', KEYS[1], 'idleExpiresAt'))
if not ends or not was then return 0 end
-- Ended by the gateway's clock, though its key has not expired yet: not revived.
if tonumber(ARGV[2]) >= math.min(was, ends) then
  redis.call('DEL', KEYS[1])
  return 0
end
local idle = math.min(tonumber(ARGV[1]), ends)
local ttl = idle - tonumber(ARGV[2])
if ttl <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('HSET', KEYS[1], 'idleExpiresAt', idle, 'lastSeenAt', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`;

/**
 * Adds a session to its owner's set, which lives as long as the owner's longest session.
 *
 * KEYS[1] the owner's sessions    <prefix>:owner-sess:<ownerId>
 * ARGV[1] the session's digest
 * ARGV[2] the session's absolute end, as a TTL in ms
 * Returns how many digests the set holds (the caller prunes ended ones past a bound).
 */
export const SESSION_LINK = `
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return redis.call('SCARD', KEYS[1])
`;

/**
 * Keeps the ACME account key unless one is kept already, so that two instances making one at
 * once end up using the same.
 *
 * KEYS[1] the account key          <prefix>:acme:account
 * ARGV[1] a new account key (PEM)
 * Returns the key kept.
 */
export const ACME_KEEP_ACCOUNT_KEY = `
local kept = redis.call('GET', KEYS[1])
if kept then return kept end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`;

/**
 * Keeps a new ACME certificate until it expires, and announces it to every instance.
 *
 * KEYS[1] the certificate          <prefix>:acme:cert
 * ARGV[1] the certificate with its key (JSON)
 * ARGV[2] its expiry, epoch ms (PEXPIREAT)
 * ARGV[3] the channel              <prefix>:acme
 * ARGV[4] the announcement (the saving instance's id)
 */
export const ACME_SAVE_CERTIFICATE = `
redis.call('SET', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`;

/**
 * Releases the ACME order lock only if it is still the caller's: a holder whose lock lapsed
 * (and was taken by another instance) must not release the other's.
 *
 * KEYS[1] the lock                 <prefix>:acme:lock
 * ARGV[1] the holder's token
 * Returns 1 when released, 0 when the lock was not (or no longer) the caller's.
 */
export const ACME_UNLOCK = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * Queues mails, all or none, unless they would take the outbox past its bound.
 *
 * KEYS[1] the mails               <prefix>:outbox:{mail}:mails
 * KEYS[2] their due times         <prefix>:outbox:{mail}:due
 * ARGV[1] the bound (mails queued at most)
 * ARGV[2..] per mail: its id, the mail as JSON, when it is due (epoch ms)
 * Returns 1 when queued, 0 when full (nothing queued).
 */
export const OUTBOX_ENQUEUE = `
local fresh = 0
for i = 2, #ARGV, 3 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then fresh = fresh + 1 end
end
if redis.call('HLEN', KEYS[1]) + fresh > tonumber(ARGV[1]) then return 0 end
for i = 2, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then redis.call('ZADD', KEYS[2], ARGV[i + 2], ARGV[i]) end
end
return 1
`;

/**
 * Claims the mails due now for a lease: their due time moves to the lease's end, so no other
 * instance's claim gets them until then, and each gets a new claim token.
 *
 * KEYS[1] the mails               <prefix>:outbox:{mail}:mails
 * KEYS[2] their due times         <prefix>:outbox:{mail}:due
 * KEYS[3] their claims            <prefix>:outbox:{mail}:claims
 * ARGV[1] now (epoch ms)
 * ARGV[2] the lease's end (epoch ms)
 * ARGV[3] how many at most
 * ARGV[4] the claim's token (a suffix per mail is added: one token per mail)
 * Returns a flat list: per mail its JSON and its claim token.
 */
export const OUTBOX_CLAIM = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for n, id in ipairs(ids) do
  local mail = redis.call('HGET', KEYS[1], id)
  if mail then
    local claim = ARGV[4] .. '.' .. n
    redis.call('ZADD', KEYS[2], ARGV[2], id)
    redis.call('HSET', KEYS[3], id, claim)
    out[#out + 1] = mail
    out[#out + 1] = claim
  else
    redis.call('ZREM', KEYS[2], id)
  end
end
return out
`;

/**
 * Settles a claimed mail, if the claim is still its current one: sent (ARGV[3] empty) removes it;
 * a retry stores it again (ARGV[3]: the mail as JSON, its attempts counted) due at ARGV[4].
 *
 * KEYS[1] the mails               <prefix>:outbox:{mail}:mails
 * KEYS[2] their due times         <prefix>:outbox:{mail}:due
 * KEYS[3] their claims            <prefix>:outbox:{mail}:claims
 * ARGV[1] the mail's id
 * ARGV[2] the claim's token
 * ARGV[3] '' (sent) or the mail as JSON (retry)
 * ARGV[4] when it is due again (retry)
 * Returns 1 when settled, 0 when the claim was not (or no longer) the current one.
 */
export const OUTBOX_SETTLE = `
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[3], ARGV[1])
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
return 1
`;

/**
 * Appends one attempt to a webhook endpoint's delivery log (state/webhooks/redis.ts), newest
 * first, keeps the newest ARGV[2], and keeps the list for the retention from now: one step, so
 * two instances logging at once never leave it longer than its bound.
 *
 * KEYS[1]   the endpoint's log       <prefix>:webhooks:log:{endpoint}
 * ARGV[1]   the attempt, as JSON
 * ARGV[2]   the entries kept
 * ARGV[3]   the retention, ms (PEXPIRE)
 * Returns the list's length.
 */
export const WEBHOOK_LOG_RECORD = `
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('LLEN', KEYS[1])
`;

/** The scripts as ioredis commands, and how they are called. */
export const SCRIPTS = {
  gwRotate: { numberOfKeys: 4, lua: ROTATE },
  gwCreateFamily: { numberOfKeys: 2, lua: CREATE_FAMILY },
  gwReset: { numberOfKeys: 1, lua: RESET },
  gwRevokeFamily: { numberOfKeys: 2, lua: REVOKE_FAMILY },
  gwInspectToken: { numberOfKeys: 3, lua: INSPECT_TOKEN },
  gwDenyToken: { numberOfKeys: 1, lua: DENY_TOKEN },
  gwRolesPage: { numberOfKeys: 2, lua: ROLES_PAGE },
  gwEpoch: { numberOfKeys: 1, lua: EPOCH },
  // The number of keys goes first in each call: every window of every hit in the batch.
  gwRateHitBatch: { lua: RATE_HIT_BATCH },
  // Their number of keys goes first too: one per bucket.
  gwUsageAdd: { lua: USAGE_ADD },
  gwUsageSum: { lua: USAGE_SUM },
  gwKeyUseRecord: { numberOfKeys: 1, lua: KEY_USE_RECORD },
  // Their number of keys goes first too: one per key record besides the account's own.
  gwOwnerCreateAccount: { lua: OWNER_CREATE_ACCOUNT },
  gwOwnerUpdateAccount: { lua: OWNER_UPDATE_ACCOUNT },
  gwOwnerAppendAudit: { numberOfKeys: 2, lua: OWNER_APPEND_AUDIT },
  gwOwnerPutRole: { numberOfKeys: 4, lua: OWNER_PUT_ROLE },
  gwOwnerDeleteRole: { numberOfKeys: 4, lua: OWNER_DELETE_ROLE },
  gwOwnerPutSign: { numberOfKeys: 3, lua: OWNER_PUT_SIGN },
  gwOwnerDeleteSign: { numberOfKeys: 3, lua: OWNER_DELETE_SIGN },
  gwPutVersioned: { numberOfKeys: 1, lua: PUT_VERSIONED },
  gwSwapIndex: { numberOfKeys: 1, lua: SWAP_INDEX },
  gwRetireLegacyKey: { numberOfKeys: 1, lua: RETIRE_LEGACY_KEY },
  gwSessionTouch: { numberOfKeys: 1, lua: SESSION_TOUCH },
  gwSessionLink: { numberOfKeys: 1, lua: SESSION_LINK },
  gwAcmeKeepAccountKey: { numberOfKeys: 1, lua: ACME_KEEP_ACCOUNT_KEY },
  gwAcmeSaveCertificate: { numberOfKeys: 1, lua: ACME_SAVE_CERTIFICATE },
  gwAcmeUnlock: { numberOfKeys: 1, lua: ACME_UNLOCK },
  gwOutboxEnqueue: { numberOfKeys: 2, lua: OUTBOX_ENQUEUE },
  gwOutboxClaim: { numberOfKeys: 3, lua: OUTBOX_CLAIM },
  gwOutboxSettle: { numberOfKeys: 3, lua: OUTBOX_SETTLE },
  gwWebhookLogRecord: { numberOfKeys: 1, lua: WEBHOOK_LOG_RECORD },
} as const;

export interface ScriptCommands {
  gwRotate(...keysThenArgs: (string | number)[]): Promise<[string, string?]>;
  gwCreateFamily(...keysThenArgs: (string | number)[]): Promise<number>;
  gwReset(...keysThenArgs: (string | number)[]): Promise<number>;
  gwRevokeFamily(...keysThenArgs: (string | number)[]): Promise<number>;
  gwInspectToken(...keysThenArgs: (string | number)[]): Promise<(string | number | null)[]>;
  gwDenyToken(...keysThenArgs: (string | number)[]): Promise<number>;
  gwRolesPage(...keysThenArgs: (string | number)[]): Promise<(number | string | null)[]>;
  gwEpoch(...keysThenArgs: (string | number)[]): Promise<[string, number]>;
  gwRateHitBatch(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>;
  gwUsageAdd(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>;
  gwUsageSum(numberOfKeys: number, ...keysThenGroups: (string | number)[]): Promise<(string | number)[]>;
  gwKeyUseRecord(...keysThenArgs: (string | number)[]): Promise<number>;
  gwOwnerCreateAccount(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>;
  gwOwnerUpdateAccount(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>;
  gwOwnerAppendAudit(...keysThenArgs: (string | number)[]): Promise<number>;
  gwOwnerPutRole(...keysThenArgs: (string | number)[]): Promise<string>;
  gwOwnerDeleteRole(...keysThenArgs: (string | number)[]): Promise<number>;
  gwOwnerPutSign(...keysThenArgs: (string | number)[]): Promise<string>;
  gwOwnerDeleteSign(...keysThenArgs: (string | number)[]): Promise<number>;
  gwPutVersioned(...keysThenArgs: (string | number)[]): Promise<number>;
  gwSwapIndex(...keysThenArgs: (string | number)[]): Promise<number>;
  gwRetireLegacyKey(...keysThenArgs: (string | number)[]): Promise<number>;
  gwSessionTouch(...keysThenArgs: (string | number)[]): Promise<number>;
  gwSessionLink(...keysThenArgs: (string | number)[]): Promise<number>;
  gwAcmeKeepAccountKey(...keysThenArgs: (string | number)[]): Promise<string>;
  gwAcmeSaveCertificate(...keysThenArgs: (string | number)[]): Promise<number>;
  gwAcmeUnlock(...keysThenArgs: (string | number)[]): Promise<number>;
  gwOutboxEnqueue(...keysThenArgs: (string | number)[]): Promise<number>;
  gwOutboxClaim(...keysThenArgs: (string | number)[]): Promise<string[]>;
  gwOutboxSettle(...keysThenArgs: (string | number)[]): Promise<number>;
  gwWebhookLogRecord(...keysThenArgs: (string | number)[]): Promise<number>;
}
