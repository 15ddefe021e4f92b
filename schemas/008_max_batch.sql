-- Migration 8: the largest batch an item shared a pass with (`run --batch`): the most
-- sequences, itself included, that one forward pass carried while this item was in it,
-- over all its attempts. 0 for items run before batching (one sequence per pass).
ALTER TABLE items ADD COLUMN max_batch INTEGER NOT NULL DEFAULT 0;
