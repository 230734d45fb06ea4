-- Rate-limit budgets (POLICY-16): one row per budget key, holding the GCRA theoretical arrival
-- time in microseconds since the Unix epoch. A budget at rest (tat in the past) is the same as
-- no row. Written only by the writer lane, inside its write transaction, so a read and the
-- write after it are one atomic step for every process on the file.
CREATE TABLE rate_limits (
    key TEXT PRIMARY KEY,
    tat INTEGER NOT NULL
) WITHOUT ROWID;
