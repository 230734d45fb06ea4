//! The SQL mapping: one pool over either backend, rows both ways, the transaction every
//! transition writes in.

pub(crate) mod db;
pub(crate) mod lite_tx;
pub(crate) mod pg_statement;
pub(crate) mod pg_tx;
pub(crate) mod row;
pub(crate) mod sqlite_tx;
pub(crate) mod tx;
pub(crate) mod write;
