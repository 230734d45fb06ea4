-- Budgets per time bucket (docs/rules.md LEDGER-74): a call's shares ride on its own row, and a
-- limit's use is kept per key and bucket of time, so reserving a share writes no row of its own.
--
-- `invocations.budget` holds the call's shares as they were judged (a JSON array: key, label,
-- unit, share, used_before, cap, window_us, over, at, bucket, until), written by the insert
-- that records the call. A window of `w` microseconds is cut into buckets `max(w / 60, 1)`
-- wide; a share adds to its bucket's `used` when its row is inserted and leaves it when the
-- row's state stops counting (the triggers below, in the same transaction, under the budget
-- lock of migration 0020). A bucket counts while `until` (its end plus the window) is after
-- now: a share counts for its whole window and at most one bucket (a sixtieth of the window)
-- longer, never shorter. Buckets no window reaches any more are deleted by the sweep.
-- A share that joins a bucket of another width (its limit's window was changed) keeps the
-- later end of the two, so no share counts shorter than its window.
ALTER TABLE invocations ADD COLUMN budget TEXT;

CREATE TABLE budget_buckets (
    limit_key  TEXT NOT NULL,
    bucket     BIGINT NOT NULL,
    used       BIGINT NOT NULL,
    until      BIGINT NOT NULL,
    label      TEXT NOT NULL,
    unit       TEXT,
    cap        BIGINT NOT NULL,
    window_us  BIGINT NOT NULL,
    PRIMARY KEY (limit_key, bucket)
);
CREATE INDEX budget_buckets_until ON budget_buckets (until);

-- A share's bucket and the time its bucket leaves every window, as the code computes them.
CREATE FUNCTION budget_bucket(at BIGINT, window_us BIGINT) RETURNS BIGINT
LANGUAGE sql IMMUTABLE AS $$
    SELECT at - at % GREATEST(window_us / 60, 1)
$$;
CREATE FUNCTION budget_until(at BIGINT, window_us BIGINT) RETURNS BIGINT
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN window_us >= 9223372036854775807 - at - GREATEST(window_us / 60, 1)
                THEN 9223372036854775807
                ELSE budget_bucket(at, window_us) + GREATEST(window_us / 60, 1) + window_us END
$$;

CREATE FUNCTION budget_reserved() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    PERFORM budget_lock();
    INSERT INTO budget_buckets AS b (limit_key, bucket, used, until, label, unit, cap, window_us)
    SELECT s->>'key', (s->>'bucket')::BIGINT, (s->>'share')::BIGINT, (s->>'until')::BIGINT,
           s->>'label', s->>'unit', (s->>'cap')::BIGINT, (s->>'window_us')::BIGINT
    FROM jsonb_array_elements(NEW.budget::jsonb) AS s
    ON CONFLICT (limit_key, bucket) DO UPDATE SET used = b.used + EXCLUDED.used,
        until = GREATEST(b.until, EXCLUDED.until),
        window_us = GREATEST(b.window_us, EXCLUDED.window_us),
        label = EXCLUDED.label, unit = EXCLUDED.unit, cap = EXCLUDED.cap;
    RETURN NULL;
END $$;
CREATE TRIGGER budget_reserved AFTER INSERT ON invocations
    FOR EACH ROW WHEN (NEW.budget IS NOT NULL) EXECUTE FUNCTION budget_reserved();

-- A row whose state stops counting (LEDGER-74's states, `budget_counts`) gives its shares back
-- once: every state that stops counting is terminal.
CREATE FUNCTION budget_released() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    PERFORM budget_lock();
    UPDATE budget_buckets b SET used = b.used - s.share
    FROM (SELECT e->>'key' AS limit_key, (e->>'bucket')::BIGINT AS bucket,
                 SUM((e->>'share')::BIGINT) AS share
          FROM jsonb_array_elements(NEW.budget::jsonb) AS e GROUP BY 1, 2) AS s
    WHERE b.limit_key = s.limit_key AND b.bucket = s.bucket;
    RETURN NULL;
END $$;
CREATE TRIGGER budget_released AFTER UPDATE OF state ON invocations
    FOR EACH ROW WHEN (NEW.budget IS NOT NULL
                       AND NOT budget_counts(NEW.state, NEW.error_kind)
                       AND budget_counts(OLD.state, OLD.error_kind))
    EXECUTE FUNCTION budget_released();

-- During a rolling upgrade (docs/rules.md OPS-86, OPS-87) the previous release still writes
-- `budget_shares`: its shares count here too, in their buckets, and leave them when their call
-- stops counting (not when that release closes them out of its own window).
CREATE FUNCTION budget_share_bucketed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    PERFORM budget_lock();
    INSERT INTO budget_buckets AS b (limit_key, bucket, used, until, label, unit, cap, window_us)
    VALUES (NEW.limit_key, budget_bucket(NEW.at, NEW.window_us), NEW.share,
            budget_until(NEW.at, NEW.window_us), NEW.label, NEW.unit, NEW.cap, NEW.window_us)
    ON CONFLICT (limit_key, bucket) DO UPDATE SET used = b.used + EXCLUDED.used,
        until = GREATEST(b.until, EXCLUDED.until),
        window_us = GREATEST(b.window_us, EXCLUDED.window_us);
    RETURN NULL;
END $$;
CREATE TRIGGER budget_share_bucketed AFTER INSERT ON budget_shares
    FOR EACH ROW WHEN (NEW.open = 1) EXECUTE FUNCTION budget_share_bucketed();

CREATE FUNCTION budget_share_unbucketed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM invocations i WHERE i.id = OLD.invocation_id
                   AND budget_counts(i.state, i.error_kind)) THEN
        PERFORM budget_lock();
        UPDATE budget_buckets SET used = used - OLD.share
        WHERE limit_key = OLD.limit_key AND bucket = budget_bucket(OLD.at, OLD.window_us);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER budget_share_unbucketed AFTER UPDATE OF open ON budget_shares
    FOR EACH ROW WHEN (OLD.open = 1 AND NEW.open = 0) EXECUTE FUNCTION budget_share_unbucketed();

-- What the shares written before this migration hold (under the budget lock, so a share the
-- previous release reserves meanwhile is counted once: by this, or by its trigger after).
SELECT budget_lock();
INSERT INTO budget_buckets AS b (limit_key, bucket, used, until, label, unit, cap, window_us)
SELECT limit_key, budget_bucket(at, window_us), SUM(share), MAX(budget_until(at, window_us)),
       MAX(label), MAX(unit), MAX(cap), MAX(window_us)
FROM budget_shares WHERE open = 1
GROUP BY limit_key, budget_bucket(at, window_us)
ON CONFLICT (limit_key, bucket) DO UPDATE SET used = b.used + EXCLUDED.used,
    until = GREATEST(b.until, EXCLUDED.until),
    window_us = GREATEST(b.window_us, EXCLUDED.window_us);
