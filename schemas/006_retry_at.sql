-- Migration 6: backoff. A queued item is not claimed before retry_at (Unix seconds); NULL
-- claims it at once. Set when an attempt fails because the item's model could not be
-- opened (a disk not mounted yet, a model being copied): each such failure waits twice as
-- long as the one before. Cleared when the item is claimed, retried or reclaimed.
ALTER TABLE items ADD COLUMN retry_at REAL;
