-- Budgets kept as running totals (docs/rules.md LEDGER-74): judging a call reads one row a
-- limit instead of summing every share in its window.
--
-- A share is `open` while it counts: from the moment it is reserved until its call stops
-- counting (its row's state, below) or the share leaves its limit's window (closed by the
-- recording transaction that finds it too old, under the budget lock). `budget_totals` holds, per
-- key, the sum of its open shares and the oldest open share's time; the triggers below keep it,
-- in the same transaction as the write that changes it, after taking the database's budget lock
-- (the one a recording transaction judges under), so two transactions never lock totals rows in
-- opposite orders. A share never reopens: every state that stops counting is terminal
-- (docs/rules.md LEDGER-2).
-- No call changes state while the shares are judged afresh (another process may still serve).
LOCK TABLE invocations IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE budget_shares ADD COLUMN open BIGINT NOT NULL DEFAULT 1;

-- The states a share counts in, as LEDGER-74 lists them (kept in this one function; a state
-- added later must be added here by a new migration).
CREATE FUNCTION budget_counts(state TEXT, error_kind TEXT) RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE AS $$
    SELECT state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer', 'approved',
                     'running', 'in_doubt', 'succeeded', 'resolved', 'input_required')
        OR (state = 'failed' AND COALESCE(error_kind IN ('timeout', 'upstream_error',
                                                         'bad_response', 'tool_failed',
                                                         'task_failed'), FALSE))
$$;

-- One index serves judging (a key's open shares by time) and `GET /v1/limits`; a call's own
-- shares are found by the primary key. Each index is pages every recording commit writes.
DROP INDEX budget_shares_by_key;
CREATE INDEX budget_shares_open ON budget_shares (limit_key, open, at);

CREATE TABLE budget_totals (
    limit_key  TEXT PRIMARY KEY,
    used       BIGINT NOT NULL,
    oldest     BIGINT
);

CREATE FUNCTION budget_lock() RETURNS VOID LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/budgets', 0))
$$;

CREATE FUNCTION budget_share_reserved() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    PERFORM budget_lock();
    INSERT INTO budget_totals (limit_key, used, oldest) VALUES (NEW.limit_key, NEW.share, NEW.at)
    ON CONFLICT (limit_key) DO UPDATE SET
        used = budget_totals.used + EXCLUDED.used,
        oldest = LEAST(budget_totals.oldest, EXCLUDED.oldest);
    RETURN NULL;
END $$;
CREATE TRIGGER budget_share_reserved AFTER INSERT ON budget_shares
    FOR EACH ROW WHEN (NEW.open = 1) EXECUTE FUNCTION budget_share_reserved();

CREATE FUNCTION budget_share_closed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    PERFORM budget_lock();
    UPDATE budget_totals SET
        used = used - OLD.share,
        oldest = (SELECT MIN(at) FROM budget_shares WHERE limit_key = OLD.limit_key AND open = 1)
    WHERE limit_key = OLD.limit_key;
    RETURN NULL;
END $$;
CREATE TRIGGER budget_share_closed AFTER UPDATE OF open ON budget_shares
    FOR EACH ROW WHEN (OLD.open = 1 AND NEW.open = 0) EXECUTE FUNCTION budget_share_closed();

-- The budget lock before any share row: a recording transaction takes it before it closes
-- shares out of their window, so the two never lock in opposite orders. A call with no open
-- share takes no lock at all.
CREATE FUNCTION budget_call_released() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM budget_shares WHERE invocation_id = NEW.id AND open = 1) THEN
        PERFORM budget_lock();
        UPDATE budget_shares SET open = 0 WHERE invocation_id = NEW.id AND open = 1;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER budget_call_released AFTER UPDATE OF state ON invocations
    FOR EACH ROW WHEN (NOT budget_counts(NEW.state, NEW.error_kind))
    EXECUTE FUNCTION budget_call_released();

-- What existing shares hold, once the triggers are in place: a call that stops counting
-- meanwhile (another process still serving) is closed by them, not missed.
UPDATE budget_shares s SET open = 0 WHERE NOT EXISTS (
    SELECT 1 FROM invocations i WHERE i.id = s.invocation_id AND budget_counts(i.state, i.error_kind));
INSERT INTO budget_totals (limit_key, used, oldest)
    SELECT limit_key, SUM(share), MIN(at) FROM budget_shares WHERE open = 1 GROUP BY limit_key
    ON CONFLICT (limit_key) DO UPDATE SET used = excluded.used, oldest = excluded.oldest;
