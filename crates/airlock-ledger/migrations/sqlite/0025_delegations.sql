-- Delegations (docs/rules.md LEDGER-79): a decider hands their role to another principal for
-- a window. Rows are never deleted: they are the audit of who could decide for whom, when.
CREATE TABLE delegations (
    from_principal  TEXT NOT NULL,
    to_principal    TEXT NOT NULL,
    starts_at       INTEGER NOT NULL,
    ends_at         INTEGER NOT NULL,
    PRIMARY KEY (from_principal, to_principal, starts_at)
);
CREATE INDEX delegations_to ON delegations (to_principal, ends_at);
