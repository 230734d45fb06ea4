//! The exit statuses of `airlock`, one table for every command (docs/cli.md, "Exit codes"):
//! 0 done, 1 error, 2 usage (clap), and these for outcomes a script must tell apart.
//!
//! Guarantees: each number means one thing across commands, so a script can branch on it
//! without knowing which command ran.

/// A usage error: clap's own, and an environment setting that does not parse (`AIRLOCK_LOG`).
pub(crate) const USAGE: u8 = 2;
/// `egress check`: the guard would block the URL.
pub(crate) const BLOCKED: u8 = 3;
/// `call`: the call waits for a person (approval or answer) or was recorded as a proposal;
/// nothing ran. `run`: the run is parked — one of its calls waits for a person.
pub(crate) const PARKED: u8 = 4;
/// `call`: the call settled without success — a tool error, denied, expired or abandoned.
/// `run`: the run failed or was cancelled.
pub(crate) const CALL_FAILED: u8 = 5;
/// `call`: the call is in doubt or running elsewhere; it may have run, a person settles it.
pub(crate) const IN_DOUBT: u8 = 6;
