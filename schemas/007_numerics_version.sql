-- Migration 7: the engine numerics version (engine/forward/numerics.h) whose arithmetic
-- produced the item's stored output tokens, state checkpoint and result. NULL: nothing
-- stored yet, or stored by a binary from before versions were recorded. An item whose
-- stored output came from other arithmetic is replayed from its prompt before it goes on,
-- and restarted from its prompt when the replay does not draw every stored token again
-- (runner/item_runner.h).
ALTER TABLE items ADD COLUMN numerics_version INTEGER;
