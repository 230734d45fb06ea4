-- Escalations (docs/rules.md LEDGER-78): a waiting call nobody decided within its tool's
-- `escalate.after` is escalated once — one row, whatever the number of replicas that notice it.
CREATE TABLE escalations (
    invocation_id  TEXT PRIMARY KEY,
    escalated_to   TEXT NOT NULL,
    at             BIGINT NOT NULL
);
