-- Migration 5: whether a job's declared outputs (`outputs:` of a classify spec) were written.
-- Set when the job's last item finishes and by `nightjar results JOB --write`, so that a
-- failed write shows in `status`, `report` and `results` instead of only in the log.
--   outputs_state  NULL (none declared, or not written yet), 'written' or 'failed'
--   outputs_error  the last failure's message (NULL once they are written)
--   outputs_at     when outputs_state was last set
ALTER TABLE jobs ADD COLUMN outputs_state TEXT CHECK (outputs_state IN ('written', 'failed'));
ALTER TABLE jobs ADD COLUMN outputs_error TEXT;
ALTER TABLE jobs ADD COLUMN outputs_at    REAL;
