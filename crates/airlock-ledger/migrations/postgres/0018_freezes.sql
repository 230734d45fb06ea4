-- Freezes (docs/rules.md LEDGER-73): a kill switch on everything, an agent, a principal, a
-- connection or a tool. `freezes` holds what is frozen now, one row per target; `freeze_events`
-- keeps every freeze and unfreeze with who, when and why, for the audit. Every replica reads
-- `freezes`, so a freeze written by one reaches all.
CREATE TABLE freezes (
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    frozen_by   TEXT NOT NULL,
    frozen_at   BIGINT NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE TABLE freeze_events (
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    action      TEXT NOT NULL,
    reason      TEXT NOT NULL,
    by_whom     TEXT NOT NULL,
    at          BIGINT NOT NULL
);
