-- What a delivered notification left at its destination, for the notifications that follow
-- it (docs/rules.md LEDGER-34): the Slack message (channel and ts) a later decision replaces.
CREATE TABLE notification_refs (
    invocation_id  TEXT NOT NULL,
    destination    TEXT NOT NULL,
    reference      TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (invocation_id, destination)
);
