//! Rate-limit budgets kept in the ledger's database (POLICY-16), so every process and replica
//! on one database spends from the same budget and together never exceed the declared rate.
//!
//! A budget is a GCRA (generic cell rate algorithm) bucket: `requests` calls per `per`, refilling
//! evenly (one call every `per / requests`), holding at most `requests`. Its whole state is one
//! number per key, the theoretical arrival time. A call takes from every budget it is subject
//! to, or from none (a refusal by one budget spends nothing from the others).
//!
//! PostgreSQL: one statement per call (`airlock_take_rate`, migration 0005), outside the writer
//! lanes, with the rows locked in key order. SQLite: a job on the one writer lane, whose write
//! transaction holds the file's write lock from the read to the write, so a CLI and a server on
//! the same file share the budget too.

use std::time::Duration;

use sqlx::Row as _;
use sqlx::postgres::PgPool;

use crate::sql::tx::LedgerTx;
use crate::vocabulary::error::LedgerError;

/// One budget a call spends from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateBudget {
    /// What the budget protects; calls with the same key share it (any text, at most a few
    /// hundred bytes).
    pub key: String,
    /// Calls allowed per window (at least 1).
    pub requests: u32,
    /// The window.
    pub per: Duration,
}

/// Why a call was not taken: the budget that refused it and when it would have room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateRefusal {
    /// The index of the refusing budget among those asked for (the one with the longest wait
    /// when several refuse).
    pub budget: usize,
    /// How long until that budget has room for one call.
    pub retry_after: Duration,
}

impl RateBudget {
    /// Microseconds between two calls at the declared rate (at least 1), rounded up so the
    /// sustained rate is never above `requests` per `per`.
    fn interval_us(&self) -> i64 {
        let interval = self
            .per
            .as_micros()
            .div_ceil(u128::from(self.requests.max(1)));
        i64::try_from(interval).unwrap_or(i64::MAX).max(1)
    }

    /// How far ahead of now the theoretical arrival time may run: room for a burst of exactly
    /// `requests` calls.
    fn capacity_us(&self) -> i64 {
        self.interval_us()
            .saturating_mul(i64::from(self.requests.max(1)))
    }

    /// The GCRA step: the new theoretical arrival time if a call at `now` fits, else how long
    /// it must wait.
    fn arrive(&self, tat: i64, now: i64) -> Result<i64, i64> {
        let arrival = tat.max(now).saturating_add(self.interval_us());
        let over = arrival
            .saturating_sub(now)
            .saturating_sub(self.capacity_us());
        if over > 0 { Err(over) } else { Ok(arrival) }
    }
}

fn refusal(budget: usize, wait_us: i64) -> RateRefusal {
    RateRefusal {
        budget,
        retry_after: Duration::from_micros(u64::try_from(wait_us).unwrap_or(0)),
    }
}

/// PostgreSQL: takes one call from every budget or none, in one statement.
pub(crate) async fn take_shared(
    pool: &PgPool,
    budgets: &[RateBudget],
    now: i64,
) -> Result<Option<RateRefusal>, LedgerError> {
    if budgets.is_empty() {
        return Ok(None);
    }
    let keys: Vec<String> = budgets.iter().map(|b| b.key.clone()).collect();
    let intervals: Vec<i64> = budgets.iter().map(RateBudget::interval_us).collect();
    let capacities: Vec<i64> = budgets.iter().map(RateBudget::capacity_us).collect();
    let row = sqlx::query("SELECT wait_us, refused FROM airlock_take_rate($1, $2, $3, $4)")
        .bind(now)
        .bind(keys)
        .bind(intervals)
        .bind(capacities)
        .fetch_one(pool)
        .await?;
    let refused: Option<i32> = row.try_get("refused")?;
    let wait_us: i64 = row.try_get("wait_us")?;
    Ok(refused.map(|i| refusal(usize::try_from(i).unwrap_or(0), wait_us)))
}

/// SQLite, as a writer-lane job: reads each budget, and writes them all only if every one has
/// room.
pub(crate) async fn take_in_lane(
    tx: &mut LedgerTx,
    budgets: &[RateBudget],
    now: i64,
) -> Result<Option<RateRefusal>, LedgerError> {
    let mut arrivals = Vec::with_capacity(budgets.len());
    let mut refused: Option<(usize, i64)> = None;
    for (index, budget) in budgets.iter().enumerate() {
        let row = tx
            .inner
            .fetch_optional(
                "SELECT tat FROM rate_limits WHERE key = $1",
                &[budget.key.clone().into()],
            )
            .await?;
        let tat = row.map(|r| r.req_int("tat")).transpose()?.unwrap_or(now);
        match budget.arrive(tat, now) {
            Ok(arrival) => arrivals.push(arrival),
            Err(wait) if refused.is_none_or(|(_, longest)| wait > longest) => {
                refused = Some((index, wait));
            }
            Err(_) => {}
        }
    }
    if let Some((index, wait)) = refused {
        return Ok(Some(refusal(index, wait)));
    }
    for (budget, tat) in budgets.iter().zip(arrivals) {
        tx.inner
            .execute(
                "INSERT INTO rate_limits (key, tat) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET tat = excluded.tat",
                &[budget.key.clone().into(), tat.into()],
            )
            .await?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000;

    fn budget(requests: u32, per_s: u64) -> RateBudget {
        RateBudget {
            key: "k".into(),
            requests,
            per: Duration::from_secs(per_s),
        }
    }

    #[test]
    fn a_burst_of_n_then_one_more_every_window_over_n() {
        let b = budget(3, 60);
        let mut tat = 0;
        for _ in 0..3 {
            tat = b.arrive(tat, 0).unwrap();
        }
        assert_eq!(b.arrive(tat, 0), Err(20 * SECOND));
        let tat = b.arrive(tat, 20 * SECOND).unwrap();
        assert!(b.arrive(tat, 20 * SECOND).is_err());
    }

    #[test]
    fn a_budget_at_rest_holds_no_more_than_n() {
        let b = budget(2, 60);
        let mut tat = 0;
        let now = 3600 * SECOND;
        tat = b.arrive(tat, now).unwrap();
        tat = b.arrive(tat, now).unwrap();
        assert!(b.arrive(tat, now).is_err());
    }

    #[test]
    fn uneven_windows_never_hold_more_than_n() {
        let b = budget(7, 60);
        let mut tat = 0;
        for _ in 0..7 {
            tat = b.arrive(tat, 0).unwrap();
        }
        assert!(b.arrive(tat, 0).is_err());
    }
}
