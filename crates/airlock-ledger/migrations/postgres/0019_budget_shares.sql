-- Budgets (docs/rules.md LEDGER-74): each share a call reserves of a limit, written in the
-- transaction that records the call. A share counts against its limit while its call may run,
-- runs, ran or may have run (its row's state says which); a denied, expired or abandoned call,
-- or one that failed before anything was sent, no longer counts. `used_before` and `over_cap`
-- keep what the limit stood at when the call was recorded, for the person asked to approve it.
CREATE TABLE budget_shares (
    invocation_id  TEXT NOT NULL,
    limit_key      TEXT NOT NULL,
    label          TEXT NOT NULL,
    unit           TEXT,
    share          BIGINT NOT NULL,
    used_before    BIGINT NOT NULL,
    cap            BIGINT NOT NULL,
    window_us      BIGINT NOT NULL,
    over_cap       BIGINT NOT NULL,
    at             BIGINT NOT NULL,
    PRIMARY KEY (invocation_id, limit_key)
);
CREATE INDEX budget_shares_by_key ON budget_shares (limit_key, at);
