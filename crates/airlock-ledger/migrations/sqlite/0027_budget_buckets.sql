-- Budgets per time bucket (docs/rules.md LEDGER-74): a call's shares ride on its own row, and a
-- limit's use is kept per key and bucket of time, so reserving a share writes no row of its own.
--
-- `invocations.budget` holds the call's shares as they were judged (a JSON array: key, label,
-- unit, share, used_before, cap, window_us, over, at, bucket, until), written by the insert
-- that records the call. A window of `w` microseconds is cut into buckets `max(w / 60, 1)`
-- wide; a share adds to its bucket's `used` when its row is inserted and leaves it when the
-- row's state stops counting (the triggers below, in the same transaction). A bucket counts
-- while `until` (its end plus the window) is after now: a share counts for its whole window
-- and at most one bucket (a sixtieth of the window) longer, never shorter. Buckets no window
-- reaches any more are deleted by the sweep.
--
-- The triggers read the shares with `jsonb_each`: each share reaches `json_extract` as JSONB,
-- not turned back into text and parsed again for every field (a third of what a limit added to
-- a call, docs/benchmarks.md).
--
-- A share that joins a bucket of another width (its limit's window was changed) keeps the
-- later end of the two, so no share counts shorter than its window.
ALTER TABLE invocations ADD COLUMN budget TEXT;

CREATE TABLE budget_buckets (
    limit_key  TEXT NOT NULL,
    bucket     INTEGER NOT NULL,
    used       INTEGER NOT NULL,
    until      INTEGER NOT NULL,
    label      TEXT NOT NULL,
    unit       TEXT,
    cap        INTEGER NOT NULL,
    window_us  INTEGER NOT NULL,
    PRIMARY KEY (limit_key, bucket)
) WITHOUT ROWID;
CREATE INDEX budget_buckets_until ON budget_buckets (until);

CREATE TRIGGER budget_reserved AFTER INSERT ON invocations WHEN NEW.budget IS NOT NULL
BEGIN
    INSERT INTO budget_buckets (limit_key, bucket, used, until, label, unit, cap, window_us)
    SELECT json_extract(s.value, '$.key'), json_extract(s.value, '$.bucket'),
           json_extract(s.value, '$.share'), json_extract(s.value, '$.until'),
           json_extract(s.value, '$.label'), json_extract(s.value, '$.unit'),
           json_extract(s.value, '$.cap'), json_extract(s.value, '$.window_us')
    FROM jsonb_each(NEW.budget) AS s WHERE true
    ON CONFLICT (limit_key, bucket) DO UPDATE SET used = used + excluded.used,
        until = MAX(until, excluded.until), window_us = MAX(window_us, excluded.window_us),
        label = excluded.label, unit = excluded.unit, cap = excluded.cap;
END;

-- The states a share counts in are LEDGER-74's (as in migration 0026); a row whose state stops
-- counting never counts again (every such state is terminal), and one that already had stopped
-- gives nothing back twice.
CREATE TRIGGER budget_released AFTER UPDATE OF state ON invocations
WHEN NEW.budget IS NOT NULL
 AND NOT (NEW.state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer',
                        'awaiting_credential', 'approved', 'running', 'in_doubt', 'succeeded',
                        'resolved', 'input_required')
          OR (NEW.state = 'failed' AND COALESCE(NEW.error_kind IN ('timeout',
                  'upstream_error', 'bad_response', 'tool_failed', 'task_failed'), 0)))
 AND (OLD.state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer',
                    'awaiting_credential', 'approved', 'running', 'in_doubt', 'succeeded',
                    'resolved', 'input_required')
      OR (OLD.state = 'failed' AND COALESCE(OLD.error_kind IN ('timeout',
              'upstream_error', 'bad_response', 'tool_failed', 'task_failed'), 0)))
BEGIN
    UPDATE budget_buckets SET used = used - (
        SELECT SUM(json_extract(s.value, '$.share')) FROM jsonb_each(NEW.budget) AS s
        WHERE json_extract(s.value, '$.key') = budget_buckets.limit_key
          AND json_extract(s.value, '$.bucket') = budget_buckets.bucket)
    WHERE (limit_key, bucket) IN (
        SELECT json_extract(s.value, '$.key'), json_extract(s.value, '$.bucket')
        FROM jsonb_each(NEW.budget) AS s);
END;

-- During a rolling upgrade (docs/rules.md OPS-86, OPS-87) the previous release still writes
-- `budget_shares`: its shares count here too, in their buckets, and leave them when their call
-- stops counting (not when that release closes them out of its own window).
CREATE TRIGGER budget_share_bucketed AFTER INSERT ON budget_shares WHEN NEW.open = 1
BEGIN
    INSERT INTO budget_buckets (limit_key, bucket, used, until, label, unit, cap, window_us)
    VALUES (NEW.limit_key,
            NEW.at - NEW.at % MAX(NEW.window_us / 60, 1),
            NEW.share,
            CASE WHEN NEW.window_us >= 9223372036854775807 - NEW.at - MAX(NEW.window_us / 60, 1)
                 THEN 9223372036854775807
                 ELSE NEW.at - NEW.at % MAX(NEW.window_us / 60, 1) + MAX(NEW.window_us / 60, 1)
                      + NEW.window_us END,
            NEW.label, NEW.unit, NEW.cap, NEW.window_us)
    ON CONFLICT (limit_key, bucket) DO UPDATE SET used = used + excluded.used,
        until = MAX(until, excluded.until), window_us = MAX(window_us, excluded.window_us);
END;

CREATE TRIGGER budget_share_unbucketed AFTER UPDATE OF open ON budget_shares
WHEN OLD.open = 1 AND NEW.open = 0 AND NOT EXISTS (
    SELECT 1 FROM invocations i WHERE i.id = OLD.invocation_id AND (
        i.state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer',
                    'awaiting_credential', 'approved', 'running', 'in_doubt', 'succeeded',
                    'resolved', 'input_required')
        OR (i.state = 'failed' AND COALESCE(i.error_kind IN ('timeout', 'upstream_error',
                'bad_response', 'tool_failed', 'task_failed'), 0))))
BEGIN
    UPDATE budget_buckets SET used = used - OLD.share
    WHERE limit_key = OLD.limit_key
      AND bucket = OLD.at - OLD.at % MAX(OLD.window_us / 60, 1);
END;

-- What the shares written before this migration hold.
INSERT INTO budget_buckets (limit_key, bucket, used, until, label, unit, cap, window_us)
SELECT limit_key, bucket, SUM(share), MAX(until), MAX(label), MAX(unit), MAX(cap), MAX(window_us)
FROM (SELECT limit_key, share, label, unit, cap, window_us,
             at - at % MAX(window_us / 60, 1) AS bucket,
             CASE WHEN window_us >= 9223372036854775807 - at - MAX(window_us / 60, 1)
                  THEN 9223372036854775807
                  ELSE at - at % MAX(window_us / 60, 1) + MAX(window_us / 60, 1) + window_us
             END AS until
      FROM budget_shares WHERE open = 1)
WHERE true
GROUP BY limit_key, bucket
ON CONFLICT (limit_key, bucket) DO UPDATE SET used = used + excluded.used,
    until = MAX(until, excluded.until), window_us = MAX(window_us, excluded.window_us);
