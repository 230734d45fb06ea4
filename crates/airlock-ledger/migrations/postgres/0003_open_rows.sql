-- Only open rows are ever looked up by state: the sweeper (expired leases, expired waits) and
-- the lists of pending approvals, approved calls and calls in doubt. Finished rows, which are
-- nearly all of a ledger, leave these indexes, so recording and finishing a call no longer
-- writes index pages that nothing reads. Every lookup by state (rather than by run or id)
-- names this exact predicate (`row::open_rows!`), so the planner can use the index. Running
-- rows are the calls in flight, few at any time: the lease sweep sorts them by deadline.
DROP INDEX IF EXISTS invocations_state_expiry;
DROP INDEX IF EXISTS invocations_state_lease;
CREATE INDEX invocations_open
    ON invocations (state, expires_at)
    WHERE state IN ('pending', 'awaiting_approval', 'awaiting_answer', 'approved', 'running', 'in_doubt');

-- Calls outside an agent run (all of the MCP endpoint's) have no run to list them by.
DROP INDEX IF EXISTS invocations_run_order;
CREATE INDEX invocations_run_order ON invocations (run_id, created_at, id) WHERE run_id IS NOT NULL;
