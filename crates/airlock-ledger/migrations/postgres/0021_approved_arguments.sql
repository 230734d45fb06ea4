-- The arguments a person approved in place of the proposed ones (docs/rules.md DECIDE-20):
-- NULL unless the approval edited them. `arguments` keeps what the caller proposed; the call
-- runs with these. A NULL column is left out of the row's content hash, so every row written
-- before this migration still verifies.
ALTER TABLE invocations ADD COLUMN approved_arguments TEXT;
