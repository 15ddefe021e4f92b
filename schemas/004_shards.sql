-- Migration 4: jobs submitted as one shard of a Slurm array (`nightjar submit --shard I/N`).
--   shard       "I/N" for a shard submit, NULL for a whole job
--   submission  for a shard submit: a digest of what was queued (name, kind, model, budget,
--               attempts, priority, settings and every item's id, input and parameters; not
--               the spec's path), as 16 hex digits. A task that runs again submits the same
--               shard again: the same digest means "already queued" and nothing is written;
--               another digest under the same name is refused (the spec changed).
ALTER TABLE jobs ADD COLUMN shard      TEXT;
ALTER TABLE jobs ADD COLUMN submission TEXT;
