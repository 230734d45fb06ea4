-- Rate-limit budgets (POLICY-16), shared by every replica on this database: one row per budget
-- key, holding the GCRA theoretical arrival time in microseconds since the Unix epoch. A budget
-- at rest (tat in the past) is the same as no row.
CREATE TABLE rate_limits (
    key TEXT PRIMARY KEY,
    tat BIGINT NOT NULL
);

-- Takes one call from every budget in `keys` or from none. Per key, in microseconds: the
-- interval between calls at the declared rate, and the capacity (a burst of calls). `refused`
-- is the 0-based index of the budget with the longest wait and `wait_us` that wait; null and 0
-- when the call was taken. One statement per call: the rows are locked in key order (so two
-- replicas never deadlock, and never both take the last call), checked, and written only if
-- every budget has room.
--
-- The commit is asynchronous: the call it admits is claimed next by a synchronous commit, which
-- flushes this one with it, so nothing that ran can be forgotten by a crash.
CREATE FUNCTION airlock_take_rate(
    now_us BIGINT,
    keys TEXT[],
    intervals BIGINT[],
    capacities BIGINT[],
    OUT wait_us BIGINT,
    OUT refused INT
) LANGUAGE plpgsql AS $$
DECLARE
    next_tats BIGINT[] := '{}';
    arrival BIGINT;
    i INT;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO rate_limits (key, tat)
        SELECT k, 0 FROM unnest(keys) AS k ORDER BY k
        ON CONFLICT (key) DO NOTHING;
    PERFORM 1 FROM rate_limits WHERE key = ANY (keys) ORDER BY key FOR UPDATE;
    wait_us := 0;
    FOR i IN 1 .. cardinality(keys) LOOP
        SELECT GREATEST(tat, now_us) + intervals[i] INTO arrival
            FROM rate_limits WHERE key = keys[i];
        IF arrival - now_us - capacities[i] > wait_us THEN
            wait_us := arrival - now_us - capacities[i];
            refused := i - 1;
        END IF;
        next_tats[i] := arrival;
    END LOOP;
    IF refused IS NULL THEN
        UPDATE rate_limits SET tat = n.tat
            FROM unnest(keys, next_tats) AS n (key, tat)
            WHERE rate_limits.key = n.key;
    END IF;
END
$$;
