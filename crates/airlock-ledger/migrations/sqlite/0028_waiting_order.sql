-- The calls waiting for a person, in the order their lists read them (docs/rules.md
-- LEDGER-86): a page of the oldest or newest waiting calls reads its rows from this index in
-- order and stops at the page's end, instead of reading and sorting every waiting row (a first
-- page took 36 ms with 100,000 waiting, docs/benchmarks.md), and a later page skips the rows
-- before it in the index, where `state` is at hand, without reading them. The states are
-- exactly those of the lists' query (`reads::pending_approvals!`), so the index is usable for
-- it.
CREATE INDEX invocations_waiting
    ON invocations (created_at, id, state)
    WHERE state IN ('awaiting_approval', 'awaiting_answer', 'awaiting_credential', 'proposed', 'in_doubt');
