-- The lease on an agent run being driven (docs/rules.md LEDGER-56): the process that drives a
-- `running` run holds it until `lease_deadline` (microseconds) and renews it while it runs; once
-- it has passed, another process takes the run over and resumes it from its stored steps. Only
-- a running run holds a lease (parking or ending clears it). Not part of a run's hashed content:
-- a renewal is not an event of the run.
ALTER TABLE runs ADD COLUMN lease_owner TEXT;
ALTER TABLE runs ADD COLUMN lease_deadline BIGINT;

-- The runs a takeover looks for: running, with a lease, oldest deadline first.
CREATE INDEX runs_lease ON runs (lease_deadline)
    WHERE status = 'running' AND lease_deadline IS NOT NULL;
