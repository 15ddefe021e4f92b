-- Migration 9: what speculative decoding did for each generate item (`speculative:` in the
-- job, engine/spec/), accumulated over every attempt like the other engine counters:
--   spec_passes    decode passes that fed the token just chosen with its drafts (a pass
--                  that drafted nothing counts too: the item was speculating)
--   spec_drafted   drafted tokens fed
--   spec_accepted  drafted tokens verified as exactly what plain decoding draws (each one
--                  a token emitted without a pass of its own)
-- 0 for items that did not speculate and for items run before this migration.
ALTER TABLE items ADD COLUMN spec_passes   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN spec_drafted  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN spec_accepted INTEGER NOT NULL DEFAULT 0;
