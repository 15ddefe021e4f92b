-- Migration 10: process deaths an item was not charged for (issue 35). When a `run` process
-- dies (killed, crashed, a power cut) while it holds several items in one batch, none of
-- them can be blamed, so none is charged an attempt; each counts the death here instead.
-- An item whose batches died twice (batch_deaths >= 2) runs alone from then on, so that a
-- poison item is found (a death while it runs alone is charged to it) and healthy items are
-- never charged for it. `retry` resets it with the attempts.
ALTER TABLE items ADD COLUMN batch_deaths INTEGER NOT NULL DEFAULT 0;
