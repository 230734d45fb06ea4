-- Approvals by a quorum (docs/rules.md LEDGER-76): each decider's approval of a waiting call,
-- written in the transaction that counts them; the call becomes approved in the one that
-- completes its quorum. A decider votes once per call; a named slot (a role the quorum needs
-- filled by different people) is filled once.
CREATE TABLE approval_votes (
    invocation_id  TEXT NOT NULL,
    voter          TEXT NOT NULL,
    slot           TEXT,
    at             INTEGER NOT NULL,
    PRIMARY KEY (invocation_id, voter)
);
CREATE UNIQUE INDEX approval_votes_slot ON approval_votes (invocation_id, slot);
