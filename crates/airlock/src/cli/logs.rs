//! Where and how the process logs (docs/rules.md OPS-5, OPS-11): standard error, through
//! `tracing`.
//!
//! Guarantees: airlock's own events are at `info` and every library's internals (rmcp, hyper,
//! sqlx, …) at `warn` unless `AIRLOCK_LOG` says otherwise — an invalid `AIRLOCK_LOG` is a usage
//! error, never a silent default; `RUST_LOG` is not read, so a setting meant for another
//! program never changes airlock's logs. Text carries colour only when standard error is a
//! terminal (and `NO_COLOR` is unset); `--log-format json` writes one JSON object a line.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

/// The filter without `AIRLOCK_LOG`: airlock's crates at `info`, everything else at `warn`.
pub(crate) const DEFAULT_FILTER: &str = "warn,airlock=info,airlock_runtime=info,airlock_ledger=info,airlock_mcp=info,airlock_egress=info,airlock_spec=info";

/// The filter of `airlock run` without `AIRLOCK_LOG`: warnings only. Its progress on standard
/// output is the account of the run; airlock's `info` events would repeat every step of it on
/// standard error, so a terminal would show each one twice.
pub(crate) const QUIET_FILTER: &str = "warn";

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message` and the event's
    /// fields at the top level.
    Json,
}

/// `AIRLOCK_LOG` does not parse as a filter: the parser's reason.
#[derive(Debug)]
pub(crate) struct BadFilter(String);

impl std::fmt::Display for BadFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AIRLOCK_LOG is not a valid filter ({}); e.g. AIRLOCK_LOG=warn,airlock_runtime=debug",
            self.0
        )
    }
}

/// Installs the process's subscriber: the filter from `AIRLOCK_LOG` (else `default`, one of
/// [`DEFAULT_FILTER`] and [`QUIET_FILTER`]), written to standard error in `format`.
pub(crate) fn init(format: Format, default: &str) -> Result<(), BadFilter> {
    let filter = filter(std::env::var("AIRLOCK_LOG").ok().as_deref(), default)?;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    match format {
        Format::Text => builder.init(),
        Format::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
    Ok(())
}

/// `AIRLOCK_LOG`'s directives, or `default` when it is unset or blank.
fn filter(directives: Option<&str>, default: &str) -> Result<EnvFilter, BadFilter> {
    match directives.map(str::trim) {
        None | Some("") => Ok(EnvFilter::new(default)),
        Some(directives) => EnvFilter::try_new(directives).map_err(|e| BadFilter(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_filter_is_refused_naming_the_variable() {
        let error = filter(Some("airlock=loud"), DEFAULT_FILTER).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("AIRLOCK_LOG is not a valid filter")
        );
    }

    #[test]
    fn unset_or_blank_means_the_default() {
        for unset in [None, Some(""), Some("  ")] {
            assert_eq!(
                filter(unset, DEFAULT_FILTER).unwrap().to_string(),
                EnvFilter::new(DEFAULT_FILTER).to_string()
            );
        }
    }
}
