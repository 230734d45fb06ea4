-- Pinned tool definitions (docs/rules.md LEDGER-49): the accepted definition of each tool of a
-- connection file (its name, description, input and output schema and annotations, as the
-- server sent them), by connection and the server's own tool name. A tool whose discovered
-- definition differs from its pin, or that has none while its connection has pins, is withheld
-- until an operator accepts it.
CREATE TABLE tool_pins (
    connection  TEXT NOT NULL,
    tool        TEXT NOT NULL,
    definition  TEXT NOT NULL,
    pinned_by   TEXT NOT NULL,
    pinned_at   BIGINT NOT NULL,
    PRIMARY KEY (connection, tool)
);
