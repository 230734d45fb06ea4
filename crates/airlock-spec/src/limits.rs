//! `limits:` of a declaration (docs/rules.md POLICY-57 … POLICY-60): caps on what its tools'
//! calls add up to over a window — the number of calls, a count taken from an argument (the
//! length of a list), or an amount taken from one (with a unit) — per principal, per run, per
//! agent or for the declaration as a whole.
//!
//! Guarantees: a limit is read whole or reported whole — every wrong key of every limit is named
//! at its file, line and key; a limit's `name` is unique in its declaration; an argument path is
//! a JSON pointer; a cap is a positive number (a whole one for calls and counts).

use std::time::Duration;

use crate::diag::Diag;
use crate::fields::Fields;
use crate::policy::{LimitBy, LimitOver};
use crate::tree::NodeValue;
use crate::values::duration;

/// What a limit adds up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Measure {
    /// Each call counts one.
    Calls,
    /// Each call counts the length of the list at this JSON pointer of its arguments.
    Count(String),
    /// Each call counts the number at this JSON pointer of its arguments, in `unit`.
    Amount {
        /// The JSON pointer.
        pointer: String,
        /// The unit (`EUR`), if declared.
        unit: Option<String>,
    },
}

/// One limit of a declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// Its name, unique in the declaration (`daily_spend`).
    pub name: String,
    /// What it adds up.
    pub measure: Measure,
    /// The cap over the window (a whole number for calls and counts).
    pub max: f64,
    /// The window shares are summed over.
    pub per: Duration,
    /// Whose budget it keeps.
    pub by: LimitBy,
    /// What a call over it gets.
    pub over: LimitOver,
}

/// The largest cap: amounts are kept in millionths, exactly, within 2^53.
const MAX_CAP: f64 = 9e9;
/// The longest window.
const MAX_WINDOW: Duration = Duration::from_secs(3650 * 86_400);

const KEYS: [&str; 8] = ["name", "count", "sum", "unit", "max", "per", "by", "over"];

/// Reads `limits:` of a declaration; the limits read whole, every problem reported.
pub(crate) fn limits(f: &Fields<'_>, d: &mut Diag) -> Vec<Limit> {
    let Some(items) = f.opt_list("limits", d) else {
        return Vec::new();
    };
    let mut out: Vec<Limit> = Vec::new();
    for (path, item) in items {
        let Some(l) = Fields::open(item, &path, &KEYS, d) else {
            continue;
        };
        let Some(limit) = limit(&l, d) else {
            continue;
        };
        if out.iter().any(|o| o.name == limit.name) {
            let message = format!("a second limit named `{}`: names are unique", limit.name);
            d.push(l.key_at("name"), &l.key("name"), message);
            continue;
        }
        out.push(limit);
    }
    out
}

fn limit(l: &Fields<'_>, d: &mut Diag) -> Option<Limit> {
    let name = l.req_str("name", d).filter(|name| {
        let fits = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !fits {
            let why = "a limit's name is 1 to 64 letters, digits, `_` or `-`";
            d.push(l.key_at("name"), &l.key("name"), why);
        }
        fits
    });
    let measure = measure(l, d);
    let max = l.required("max", d).and_then(|n| match n.value {
        NodeValue::Int(i) if i > 0 && i as f64 <= MAX_CAP => Some(i as f64),
        NodeValue::Float(x) if x > 0.0 && x <= MAX_CAP => Some(x),
        _ => {
            let why = "expected a number above zero and at most 9,000,000,000";
            d.push(l.key_at("max"), &l.key("max"), why);
            None
        }
    });
    let per = l
        .required("per", d)
        .and_then(|n| duration(n, &l.key("per"), d))
        .filter(|per| {
            let fits = !per.is_zero() && *per <= MAX_WINDOW;
            if !fits {
                let why = "the window must be longer than zero and at most 3650 days";
                d.push(l.key_at("per"), &l.key("per"), why);
            }
            fits
        });
    let by = l.word::<LimitBy>("by", d);
    let over = l.word::<LimitOver>("over", d);
    let (name, measure, max, per) = (name?, measure?, max?, per?);
    let (by, over) = (by.ok()?.unwrap_or_default(), over.ok()?.unwrap_or_default());
    if !matches!(measure, Measure::Amount { .. }) && max.fract() != 0.0 {
        let why = "calls and counts are whole: expected a whole number";
        d.push(l.key_at("max"), &l.key("max"), why);
        return None;
    }
    Some(Limit {
        name,
        measure,
        max,
        per,
        by,
        over,
    })
}

fn measure(l: &Fields<'_>, d: &mut Diag) -> Option<Measure> {
    let pointer = |key: &str, d: &mut Diag| {
        let p = l.opt_str(key, d)?;
        if p.starts_with('/') {
            Some(p)
        } else {
            let why = format!("expected a JSON pointer into the arguments (`/{p}`)");
            d.push(l.key_at(key), &l.key(key), why);
            None
        }
    };
    match (l.has("count"), l.has("sum")) {
        (true, true) => {
            d.push(
                l.key_at("sum"),
                &l.key("sum"),
                "a limit adds up `count` or `sum`, not both",
            );
            None
        }
        (true, false) if l.has("unit") => {
            d.push(
                l.key_at("unit"),
                &l.key("unit"),
                "`unit` goes with `sum` (an amount)",
            );
            None
        }
        (true, false) => pointer("count", d).map(Measure::Count),
        (false, true) => {
            let unit = l.opt_str("unit", d);
            pointer("sum", d).map(|pointer| Measure::Amount { pointer, unit })
        }
        (false, false) if l.has("unit") => {
            d.push(
                l.key_at("unit"),
                &l.key("unit"),
                "`unit` goes with `sum` (an amount)",
            );
            None
        }
        (false, false) => Some(Measure::Calls),
    }
}
