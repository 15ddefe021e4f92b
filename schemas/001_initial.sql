-- Migration 1: the job store's first schema. Applied by runner/store/migrations.cpp inside
-- one transaction together with the schema_version update; never edit a released
-- migration, add the next number instead. Times are Unix seconds (REAL, wall clock).

-- The number of the last applied migration: exactly one row.
CREATE TABLE schema_version (
  version INTEGER NOT NULL
);
INSERT INTO schema_version (version) VALUES (0);

-- One row per submitted spec.
CREATE TABLE jobs (
  id            INTEGER PRIMARY KEY,
  name          TEXT    NOT NULL,
  kind          TEXT    NOT NULL,              -- 'generate' (more kinds later)
  model_dir     TEXT    NOT NULL,              -- absolute
  memory_bytes  INTEGER,                       -- NULL: the engine's default budget
  max_attempts  INTEGER NOT NULL CHECK (max_attempts >= 1),
  priority      INTEGER NOT NULL DEFAULT 0,    -- higher first, then FIFO (id)
  spec_path     TEXT    NOT NULL,              -- the spec file as given to submit
  settings      TEXT    NOT NULL,              -- the job's validated settings, JSON
  created_at    REAL    NOT NULL
);

-- One row per prompt or document: its input, its state and lease, and its progress.
--   state      queued -> running -> done | failed | cancelled; running -> queued on a
--              graceful stop, a failed attempt with attempts left, or a reclaimed lease.
--   attempts   failed attempts so far (errors and runs that died holding the lease); the item
--              fails when it reaches the job's max_attempts. Graceful stops do not count.
--   lease_*    the `run` process working on it ("host/pid/start") and until when its lease
--              holds without a heartbeat. Set exactly when state = 'running'.
--   tokens_done rows in `tokens` for this item (the generated output so far).
CREATE TABLE items (
  id            INTEGER PRIMARY KEY,
  job_id        INTEGER NOT NULL REFERENCES jobs(id),
  seq           INTEGER NOT NULL,              -- position in the spec
  custom_id     TEXT    NOT NULL,
  input_text    TEXT,                          -- the prompt as text, when given as text
  prompt_ids    BLOB    NOT NULL,              -- int32 little-endian token ids
  params        TEXT    NOT NULL,              -- per-item settings, JSON (max_tokens, sampling)
  state         TEXT    NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
  attempts      INTEGER NOT NULL DEFAULT 0,
  claims        INTEGER NOT NULL DEFAULT 0,    -- times a run process took it
  lease_owner   TEXT,
  lease_expires REAL,
  tokens_done   INTEGER NOT NULL DEFAULT 0,
  prefill_s     REAL    NOT NULL DEFAULT 0,    -- engine time feeding prompt and replays, all attempts
  decode_s      REAL    NOT NULL DEFAULT 0,    -- engine time in the token loop, all attempts
  last_error    TEXT,
  started_at    REAL,
  finished_at   REAL,
  UNIQUE (job_id, custom_id),
  UNIQUE (job_id, seq),
  CHECK ((state = 'running') = (lease_owner IS NOT NULL))
);
CREATE INDEX items_by_state ON items (state, job_id, seq);

-- The append-only output log: token `token_id` at output position `pos` (0-based).
CREATE TABLE tokens (
  item_id   INTEGER NOT NULL REFERENCES items(id),
  pos       INTEGER NOT NULL CHECK (pos >= 0),
  token_id  INTEGER NOT NULL,
  PRIMARY KEY (item_id, pos)
) WITHOUT ROWID;

-- Durable state checkpoint files of running items. A row is written only after its file
-- is durable; `position` counts every token the saved state consumed (prompt + output),
-- `tokens_done` the output tokens among them.
CREATE TABLE checkpoints (
  id           INTEGER PRIMARY KEY,
  item_id      INTEGER NOT NULL REFERENCES items(id),
  position     INTEGER NOT NULL,
  tokens_done  INTEGER NOT NULL,
  path         TEXT    NOT NULL,               -- relative to the home directory
  bytes        INTEGER NOT NULL,
  created_at   REAL    NOT NULL,
  UNIQUE (item_id, position)
);

-- One result per item, inserted in the same transaction that moves the item to 'done'.
CREATE TABLE results (
  item_id          INTEGER PRIMARY KEY REFERENCES items(id),
  finish_reason    TEXT    NOT NULL,           -- 'length' (max_tokens) or 'stop' (end of sequence)
  prompt_tokens    INTEGER NOT NULL,
  output_tokens    INTEGER NOT NULL,
  output_ids       BLOB    NOT NULL,           -- int32 little-endian, equal to `tokens`
  output_text      TEXT,                       -- NULL without a tokenizer
  prefill_s        REAL    NOT NULL,           -- prompt (and replay) feeding, all attempts
  decode_s         REAL    NOT NULL,           -- token loop, all attempts
  created_at       REAL    NOT NULL
);

-- Audit log: submissions, claims, resumes, stops, failures, completions.
CREATE TABLE events (
  id       INTEGER PRIMARY KEY,
  at       REAL    NOT NULL,
  job_id   INTEGER,
  item_id  INTEGER,
  kind     TEXT    NOT NULL,
  detail   TEXT                                 -- JSON
);
CREATE INDEX events_by_item ON events (item_id, id);
