-- Calls an upstream runs as a task of its own (docs/rules.md LEDGER-64 to LEDGER-66): the
-- upstream's task id, kept beside the row, which stays `running` under the relay's lease until
-- a `tasks/get` on any replica finds the upstream's task settled and finishes the row. The id
-- is the upstream's (hostile data: at most 256 visible ASCII characters, checked before it is
-- stored); the row's own id stays the task id airlock's client sees.
CREATE TABLE relayed_tasks (
    invocation_id  TEXT PRIMARY KEY REFERENCES invocations (id),
    upstream_task  TEXT NOT NULL,
    relayed_at     BIGINT NOT NULL
);
