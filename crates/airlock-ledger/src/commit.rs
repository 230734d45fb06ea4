//! Group commit: runs the transitions as jobs in shared transactions, one fsync a batch; no
//! transition sees it.

pub(crate) mod announcer;
pub(crate) mod job;
pub(crate) mod telemetry;
pub(crate) mod writer;
