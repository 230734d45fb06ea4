-- Agent runs (docs/rules.md AGENT-5, AGENT-8): what a run needs to resume in any process
-- without asking the model or a tool again. `run_steps` holds each step's model turn (JSON) and,
-- once every call of the step settled, the results the model was shown; `run_details` holds the
-- run's request, totals and answer (JSON) and, for a sub-agent, the run and call that started
-- it. Never a connection's credential.
CREATE TABLE run_steps (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    step        BIGINT NOT NULL,
    turn        TEXT NOT NULL,
    results     TEXT,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (run_id, step)
);

CREATE TABLE run_details (
    run_id          TEXT PRIMARY KEY REFERENCES runs (id),
    parent_run_id   TEXT REFERENCES runs (id),
    parent_call_id  TEXT,
    detail          TEXT NOT NULL,
    updated_at      BIGINT NOT NULL
);

CREATE UNIQUE INDEX run_details_by_parent_call ON run_details (parent_run_id, parent_call_id);
CREATE INDEX runs_by_status ON runs (status);
CREATE INDEX runs_by_session ON runs (session_id);
