//! The vocabulary of budgets (docs/rules.md POLICY-57 … POLICY-60, LEDGER-74): a call's share of
//! a limit, how it was judged, and what a limit holds — in millionths of the limit's unit, so
//! sums are exact.

use std::time::Duration;

/// What happens to a call that would take a limit past its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverLimit {
    /// The call fails with a tool error naming the limit and what is left.
    Deny,
    /// The call waits for a person, who sees the figures.
    Approval,
}

/// One share a call asks of one limit, in millionths of the limit's unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetShare {
    /// The limit's key: the declaration, the limit's name, and whose budget (`…/principal:ada`).
    pub key: String,
    /// How a person reads the limit (`daily_spend per principal ada`).
    pub label: String,
    /// The unit of an amount (`EUR`), none for counts.
    pub unit: Option<String>,
    /// This call's share.
    pub share: i64,
    /// The cap over the window.
    pub cap: i64,
    /// The window the shares are summed over.
    pub window: Duration,
    /// What happens over the cap.
    pub over: OverLimit,
}

/// A share as it was reserved: the limit's use before the call, and whether it went over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetUse {
    /// The limit's key.
    pub key: String,
    /// How a person reads the limit.
    pub label: String,
    /// The unit, if any.
    pub unit: Option<String>,
    /// This call's share.
    pub share: i64,
    /// What the window held before this call.
    pub used_before: i64,
    /// The cap.
    pub cap: i64,
    /// The window.
    pub window: Duration,
    /// Whether this call went over the cap.
    pub over: bool,
}

impl BudgetUse {
    /// `520 of 500 EUR in 1d (daily_spend per principal ada)`: what a person reads.
    #[must_use]
    pub fn figures(&self) -> String {
        let unit = self
            .unit
            .as_deref()
            .map(|u| format!(" {u}"))
            .unwrap_or_default();
        format!(
            "{} of {}{unit} in {} ({})",
            amount(self.used_before.saturating_add(self.share)),
            amount(self.cap),
            window(self.window),
            self.label
        )
    }

    /// What is left of the cap before this call.
    #[must_use]
    pub fn left(&self) -> String {
        let unit = self
            .unit
            .as_deref()
            .map(|u| format!(" {u}"))
            .unwrap_or_default();
        format!(
            "{}{unit}",
            amount(self.cap.saturating_sub(self.used_before).max(0))
        )
    }
}

/// Millionths as a decimal, without trailing zeros.
fn amount(micros: i64) -> String {
    let whole = micros / 1_000_000;
    let frac = (micros % 1_000_000).abs();
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:06}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

fn window(w: Duration) -> String {
    if w.subsec_nanos() != 0 {
        return format!("{}ms", w.as_millis());
    }
    let s = w.as_secs();
    match s {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// What one limit holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitUsage {
    /// The limit's key.
    pub key: String,
    /// How a person reads it.
    pub label: String,
    /// The unit, if any.
    pub unit: Option<String>,
    /// What counts against it in its window now.
    pub used: i64,
    /// The cap, as the newest share carried it.
    pub cap: i64,
    /// The window.
    pub window: Duration,
}
