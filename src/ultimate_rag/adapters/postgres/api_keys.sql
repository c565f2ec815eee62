-- API keys, stored only as hashes (SPEC §7). Loaded by name ("-- name --" headers).

-- insert_key --
-- The prefix is unique: a taken one raises UniqueViolation and the caller draws a new key.
INSERT INTO api_keys (id, prefix, key_hash, is_admin, scopes, name, expires_at)
VALUES (%(id)s, %(prefix)s, %(key_hash)s, %(is_admin)s, %(scopes)s, %(name)s, %(expires_at)s)
RETURNING *;

-- list_keys --
SELECT * FROM api_keys ORDER BY created_at, id;

-- revoke_key --
-- By id or by prefix; revoking twice keeps the first revocation time.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE (id = %(id)s OR prefix = %(prefix)s)
RETURNING *;

-- live_key --
-- The usable key with this prefix, and whether it was used within the last %(interval)s seconds
-- (then last_used_at is not written again).
SELECT id, key_hash, is_admin, scopes,
       coalesce(last_used_at > now() - make_interval(secs => %(interval)s), false) AS recently_used
FROM api_keys
WHERE prefix = %(prefix)s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());

-- touch_key --
-- The interval is checked again here: of concurrent requests with one key, one writes.
UPDATE api_keys SET last_used_at = now()
WHERE id = %(id)s AND (last_used_at IS NULL OR last_used_at <= now() - make_interval(secs => %(interval)s));

-- key_is_valid --
SELECT 1 AS ok FROM api_keys
WHERE prefix = %(prefix)s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());
