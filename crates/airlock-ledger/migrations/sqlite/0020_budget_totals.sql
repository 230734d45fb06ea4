-- Budgets kept as running totals (docs/rules.md LEDGER-74): judging a call reads one row a
-- limit instead of summing every share in its window.
--
-- A share is `open` while it counts: from the moment it is reserved until its call stops
-- counting (its row's state, below) or the share leaves its limit's window (closed by the
-- recording transaction that finds it too old, under the budget lock). `budget_totals` holds, per
-- key, the sum of its open shares and the oldest open share's time; the triggers below keep it,
-- in the same transaction as the write that changes it. A share never reopens: every state that
-- stops counting is terminal (docs/rules.md LEDGER-2).
ALTER TABLE budget_shares ADD COLUMN open INTEGER NOT NULL DEFAULT 1;

-- One index serves judging (a key's open shares by time) and `GET /v1/limits`; a call's own
-- shares are found by the primary key. Each index is pages every recording commit writes.
DROP INDEX budget_shares_by_key;
CREATE INDEX budget_shares_open ON budget_shares (limit_key, open, at);

CREATE TABLE budget_totals (
    limit_key  TEXT PRIMARY KEY,
    used       INTEGER NOT NULL,
    oldest     INTEGER
);

CREATE TRIGGER budget_share_reserved AFTER INSERT ON budget_shares WHEN NEW.open = 1
BEGIN
    INSERT INTO budget_totals (limit_key, used, oldest) VALUES (NEW.limit_key, NEW.share, NEW.at)
    ON CONFLICT (limit_key) DO UPDATE SET
        used = used + excluded.used,
        oldest = CASE WHEN oldest IS NULL OR excluded.oldest < oldest
                      THEN excluded.oldest ELSE oldest END;
END;

CREATE TRIGGER budget_share_closed AFTER UPDATE OF open ON budget_shares
WHEN OLD.open = 1 AND NEW.open = 0
BEGIN
    UPDATE budget_totals SET
        used = used - OLD.share,
        oldest = (SELECT MIN(at) FROM budget_shares
                  WHERE limit_key = OLD.limit_key AND open = 1)
    WHERE limit_key = OLD.limit_key;
END;

-- The states a share counts in, as LEDGER-74 lists them (kept in this one predicate; a state
-- added later must be added here by a new migration).
CREATE TRIGGER budget_call_released AFTER UPDATE OF state ON invocations
WHEN NOT (NEW.state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer',
                        'approved', 'running', 'in_doubt', 'succeeded', 'resolved',
                        'input_required')
          OR (NEW.state = 'failed' AND COALESCE(NEW.error_kind IN ('timeout',
                  'upstream_error', 'bad_response', 'tool_failed', 'task_failed'), 0)))
BEGIN
    UPDATE budget_shares SET open = 0 WHERE invocation_id = NEW.id AND open = 1;
END;

-- What existing shares hold, once the triggers are in place: a call that stops counting
-- meanwhile (another process still serving) is closed by them, not missed.
UPDATE budget_shares SET open = 0 WHERE NOT EXISTS (
    SELECT 1 FROM invocations i WHERE i.id = budget_shares.invocation_id AND (
        i.state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer', 'approved',
                    'running', 'in_doubt', 'succeeded', 'resolved', 'input_required')
        OR (i.state = 'failed' AND i.error_kind IN ('timeout', 'upstream_error', 'bad_response',
                                                   'tool_failed', 'task_failed'))));
INSERT INTO budget_totals (limit_key, used, oldest)
    SELECT limit_key, SUM(share), MIN(at) FROM budget_shares WHERE open = 1 GROUP BY limit_key
    ON CONFLICT (limit_key) DO UPDATE SET used = excluded.used, oldest = excluded.oldest;
