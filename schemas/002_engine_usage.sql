-- Migration 2: what the engine did for each item, for `status`, `results` and `report`,
-- and kind-specific result details. All counters accumulate over every attempt, like
-- prefill_s and decode_s.
--   io_wait_s     engine time blocked waiting for weights from disk
--   compute_s     engine time in kernels
--   bytes_read    weight bytes read from disk (trunk, experts, embedding rows, head)
--   tokens_fed    tokens the engine consumed (prompt, replays and decode inputs)
--   decode_steps  single-token forward passes after the prompt (0 for a classification
--                 whose labels' first tokens differ)
ALTER TABLE items ADD COLUMN io_wait_s    REAL    NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN compute_s    REAL    NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN bytes_read   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN tokens_fed   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN decode_steps INTEGER NOT NULL DEFAULT 0;

-- Kind-specific result fields as one JSON object (classification: label, probabilities,
-- margin, decode_steps, prefix and suffix tokens); NULL for plain generations. A
-- classification's results row has finish_reason 'label', output_ids the label's tokens and
-- prompt_tokens the document + suffix tokens it fed (the shared prefix is in details).
ALTER TABLE results ADD COLUMN details TEXT;
