-- A session's calls are listed through the unique (session_id, call_id) index and sorted: an
-- agent conversation holds tens or hundreds of calls, a sort of which costs nothing beside the
-- second per-session index every new call had to write. With many sessions busy at once, each
-- session's entries sit on a different index page, so that index cost a page per session in
-- every commit — most of a batch's WAL writes.
DROP INDEX IF EXISTS invocations_session_order;
