-- A session's calls are listed through the unique (session_id, call_id) index and sorted (an
-- agent conversation holds tens or hundreds of calls): every new call no longer writes a
-- second per-session index entry. As in the SQLite schema.
DROP INDEX IF EXISTS invocations_session_order;
