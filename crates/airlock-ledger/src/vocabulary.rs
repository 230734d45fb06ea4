//! The vocabulary: ids, clocks, rows as domain types, the state table, errors.

pub(crate) mod budget;
pub(crate) mod clock;
pub(crate) mod credential;
pub(crate) mod error;
pub(crate) mod ids;
pub(crate) mod model;
pub(crate) mod state;
