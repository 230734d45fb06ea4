//! PostgreSQL: how a batch's writes become one statement. Each multi-row write carries its
//! rows as one array per column (`unnest`), so a kind of statement has one text however many
//! rows it carries (LEDGER-52); consecutive writes become data-modifying CTEs of one statement,
//! which returns the sum of their counts (and, if asked, one row read beside them, AGENT-55).
//!
//! Guarantees. The arrays keep the rows' order and NULLs; a column whose rows disagree on its
//! type is refused, never bound as something else; a write that must see an earlier one's rows
//! starts a new statement.

use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;

use crate::sql::write::{CountedWrite, SqlValue, bound};

/// PostgreSQL's row source (see [`crate::sql::db::DbTx::row_source`]): `$1 … $width` as typed arrays.
pub(crate) fn pg_row_source(binds: &[SqlValue], width: usize) -> String {
    let arrays: Vec<String> = binds
        .iter()
        .take(width)
        .enumerate()
        .map(|(k, v)| {
            let ty = if is_int(v) { "bigint" } else { "text" };
            format!("${}::{ty}[]", k + 1)
        })
        .collect();
    let names: Vec<String> = (1..=arrays.len()).map(|k| format!("column{k}")).collect();
    format!(
        "SELECT * FROM unnest({}) AS u({})",
        arrays.join(", "),
        names.join(", ")
    )
}

/// Binds one PostgreSQL statement may carry (the protocol allows 65,535), with room to spare.
const PG_BINDS_PER_STATEMENT: usize = 30_000;

/// PostgreSQL: whether `writes` are one statement (see [`pg_groups`]).
pub(crate) fn fits_one_statement(writes: &[CountedWrite]) -> bool {
    let binds: usize = writes.iter().map(|w| w.binds.len()).sum();
    !writes.is_empty()
        && writes.iter().skip(1).all(|w| !w.sees_earlier)
        && binds <= PG_BINDS_PER_STATEMENT
}

/// PostgreSQL: consecutive writes share a statement unless one must see an earlier one's rows
/// or the statement would pass [`PG_BINDS_PER_STATEMENT`].
pub(crate) fn pg_groups(writes: Vec<CountedWrite>) -> Vec<Vec<CountedWrite>> {
    let mut groups: Vec<(usize, Vec<CountedWrite>)> = Vec::new();
    for w in writes {
        match groups.last_mut() {
            Some((binds, group))
                if !w.sees_earlier && *binds + w.binds.len() <= PG_BINDS_PER_STATEMENT =>
            {
                *binds += w.binds.len();
                group.push(w);
            }
            _ => groups.push((w.binds.len(), vec![w])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// PostgreSQL: one column of a multi-row write, bound as one array (see [`crate::sql::db::DbTx::row_source`]).
#[derive(Debug, PartialEq)]
pub(crate) enum Column {
    Text(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
}

pub(crate) fn is_int(v: &SqlValue) -> bool {
    matches!(v, SqlValue::Int(_) | SqlValue::NullInt)
}

/// The rows of `binds` (`width` values each) as columns, each typed as its first row's value
/// (as [`crate::sql::db::DbTx::row_source`] typed the statement's arrays). A value of the other type is a bug in
/// the statement's builder, refused rather than bound as something else.
fn columns(binds: Vec<SqlValue>, width: usize) -> Result<Vec<Column>, sqlx::Error> {
    let width = width.max(1);
    let rows = binds.len() / width;
    let mut columns: Vec<Column> = binds
        .iter()
        .take(width)
        .map(|v| {
            if is_int(v) {
                Column::Int(Vec::with_capacity(rows))
            } else {
                Column::Text(Vec::with_capacity(rows))
            }
        })
        .collect();
    for (i, v) in binds.into_iter().enumerate() {
        match (&mut columns[i % width], v) {
            (Column::Text(c), SqlValue::Text(t)) => c.push(Some(t)),
            (Column::Int(c), SqlValue::Int(n)) => c.push(Some(n)),
            (Column::Text(c), SqlValue::Null | SqlValue::NullInt) => c.push(None),
            (Column::Int(c), SqlValue::Null | SqlValue::NullInt) => c.push(None),
            // Names the column, never the value (it may be a call's arguments).
            _ => {
                return Err(sqlx::Error::Protocol(format!(
                    "column {} of a batched write mixes text and integers",
                    i % width + 1
                )));
            }
        }
    }
    Ok(columns)
}

/// How the statement of [`as_ctes`] ends.
#[derive(Clone, Copy)]
pub(crate) enum Finish<'a> {
    /// Returns the sum of the writes' counts as `n`.
    Count,
    /// Also returns this query's row (its placeholders moved past the columns too), marked by
    /// a non-null `found_`.
    Then(&'a str),
    /// Fails unless the sum equals the one bind after the columns (see [`lone_write`]).
    Check,
    /// [`Finish::Check`], then this query's row as [`Finish::Then`] returns it (its
    /// placeholders moved past the columns and the expected count).
    CheckThen(&'a str),
}

/// PostgreSQL: `WITH w0 AS (… RETURNING 1), w1 AS (…) SELECT` the sum of their counts as `n`,
/// each statement's `$n` moved past the columns of those before it.
pub(crate) fn as_ctes(
    writes: Vec<CountedWrite>,
    finish: Finish<'_>,
) -> Result<(String, Vec<Column>), sqlx::Error> {
    let mut sql = String::from("WITH ");
    let mut counts = Vec::with_capacity(writes.len());
    let mut binds = Vec::new();
    for (i, w) in writes.into_iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("w{i} AS ("));
        shift_placeholders(&w.sql, binds.len(), &mut sql);
        sql.push_str(" RETURNING 1)");
        counts.push(format!("(SELECT count(*) FROM w{i})"));
        binds.extend(columns(w.binds, w.width)?);
    }
    let sum = format!("({})::bigint", counts.join(" + "));
    let n = format!("{sum} AS n");
    // The failing cast runs only when the counts differ; it names the marker the caller
    // recognises, never a value.
    let checked = format!(
        "CASE WHEN c.n = ${}::bigint THEN c.n ELSE ('{SHORT_WRITE} ' || c.n)::bigint END AS n",
        binds.len() + 1
    );
    match finish {
        Finish::Count => sql.push_str(&format!(" SELECT {n}")),
        Finish::Then(query) => {
            sql.push_str(&format!(
                " SELECT c.n, r.* FROM (SELECT {n}) AS c LEFT JOIN (SELECT true AS found_, q.* \
                 FROM ("
            ));
            shift_placeholders(query, binds.len(), &mut sql);
            sql.push_str(") AS q) AS r ON true");
        }
        Finish::Check => sql.push_str(&format!(" SELECT {checked} FROM (SELECT {n}) AS c")),
        Finish::CheckThen(query) => {
            sql.push_str(&format!(
                " SELECT {checked}, r.* FROM (SELECT {n}) AS c LEFT JOIN (SELECT true AS found_, \
                 q.* FROM ("
            ));
            shift_placeholders(query, binds.len() + 1, &mut sql);
            sql.push_str(") AS q) AS r ON true");
        }
    }
    Ok((sql, binds))
}

/// The marker of a lone write whose counts fell short.
const SHORT_WRITE: &str = "airlock_short_write";

/// LEDGER-53: `writes` (one statement's worth, see [`fits_one_statement`]) as a transaction of
/// their own on `conn`, which has none open: committed when the statement ends, or, if any
/// write's count fell short, failed inside it so that nothing commits (`false`).
pub(crate) async fn lone_write(
    conn: &mut sqlx::PgConnection,
    writes: Vec<CountedWrite>,
) -> Result<bool, sqlx::Error> {
    let expected: u64 = writes.iter().map(|w| w.rows).sum();
    let (sql, columns) = as_ctes(writes, Finish::Check)?;
    let q = bind_columns(sqlx::query(sqlx::AssertSqlSafe(sql)), columns)
        .bind(i64::try_from(expected).unwrap_or(i64::MAX));
    // Read to its end: the reply is complete only once the statement's transaction committed.
    match q.fetch_optional(conn).await {
        Ok(_) => Ok(true),
        Err(sqlx::Error::Database(e)) if e.message().contains(SHORT_WRITE) => Ok(false),
        Err(e) => Err(e),
    }
}

/// AGENT-62: `writes` and then `query` as [`lone_write`] sends writes alone: one statement on
/// `conn`, which has no transaction open, committed when it ends; if a write's count fell short
/// nothing commits (`false`, no row). Otherwise the query's row, read from the snapshot the
/// statement started with (`None` if it found none).
pub(crate) async fn lone_write_then(
    conn: &mut sqlx::PgConnection,
    writes: Vec<CountedWrite>,
    query: &str,
    binds: &[SqlValue],
) -> Result<(bool, Option<sqlx::postgres::PgRow>), sqlx::Error> {
    let expected: u64 = writes.iter().map(|w| w.rows).sum();
    let (sql, columns) = as_ctes(writes, Finish::CheckThen(query))?;
    let q = bind_columns(sqlx::query(sqlx::AssertSqlSafe(sql)), columns)
        .bind(i64::try_from(expected).unwrap_or(i64::MAX));
    match bound!(q, binds).fetch_one(conn).await {
        Ok(row) => {
            let found: Option<bool> = sqlx::Row::try_get(&row, "found_")?;
            Ok((true, found.map(|_| row)))
        }
        Err(sqlx::Error::Database(e)) if e.message().contains(SHORT_WRITE) => Ok((false, None)),
        Err(e) => Err(e),
    }
}

/// Copies `sql` to `out` with every `$n` as `$(n + by)`. Only for the ledger's own statements,
/// which hold no `$` but their placeholders (no literals, no dollar quoting).
fn shift_placeholders(sql: &str, by: usize, out: &mut String) {
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + by).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
}

/// Binds `columns` to `q`, one array each.
pub(crate) fn bind_columns<'q>(
    mut q: Query<'q, Postgres, PgArguments>,
    columns: Vec<Column>,
) -> Query<'q, Postgres, PgArguments> {
    for column in columns {
        q = match column {
            Column::Text(v) => q.bind(v),
            Column::Int(v) => q.bind(v),
        };
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_shift_past_earlier_binds() {
        let mut out = String::new();
        shift_placeholders("INSERT INTO t VALUES ($1, $2), ($3, $10)", 7, &mut out);
        assert_eq!(out, "INSERT INTO t VALUES ($8, $9), ($10, $17)");
    }

    fn write(binds: usize, sees_earlier: bool) -> CountedWrite {
        CountedWrite {
            sql: String::new(),
            binds: vec![SqlValue::Int(0); binds],
            width: binds,
            rows: 1,
            sees_earlier,
        }
    }

    #[test]
    fn pg_statements_split_on_dependencies_and_bind_budget() {
        let sizes = |groups: Vec<Vec<CountedWrite>>| -> Vec<Vec<usize>> {
            groups
                .iter()
                .map(|g| g.iter().map(|w| w.binds.len()).collect())
                .collect()
        };
        let writes = vec![
            write(10, false),
            write(20, false),
            write(5, true),
            write(20_000, false),
            write(10_000, false),
            write(1, false),
        ];
        assert_eq!(
            sizes(pg_groups(writes)),
            vec![vec![10, 20], vec![5, 20_000], vec![10_000, 1]]
        );
    }

    #[test]
    fn writes_become_ctes_summing_their_counts() {
        let w = |sql: &str, width: usize, rows: usize| CountedWrite {
            sql: sql.to_owned(),
            binds: (0..width * rows).map(|i| SqlValue::Int(i as i64)).collect(),
            width,
            rows: rows as u64,
            sees_earlier: false,
        };
        let (sql, columns) = as_ctes(
            vec![
                w(
                    "INSERT INTO a SELECT * FROM unnest($1::bigint[], $2::bigint[])",
                    2,
                    3,
                ),
                w("UPDATE b SET x = $1", 1, 1),
            ],
            Finish::Count,
        )
        .unwrap();
        assert_eq!(
            sql,
            "WITH w0 AS (INSERT INTO a SELECT * FROM unnest($1::bigint[], $2::bigint[]) \
             RETURNING 1), w1 AS (UPDATE b SET x = $3 RETURNING 1) SELECT ((SELECT count(*) FROM \
             w0) + (SELECT count(*) FROM w1))::bigint AS n"
        );
        assert_eq!(
            columns,
            vec![
                Column::Int(vec![Some(0), Some(2), Some(4)]),
                Column::Int(vec![Some(1), Some(3), Some(5)]),
                Column::Int(vec![Some(0)]),
            ]
        );
    }

    /// AGENT-55: the writes and a read of another table in one statement, the read's
    /// placeholders after the writes' columns, its row marked as found.
    #[test]
    fn a_read_rides_on_the_writes_statement() {
        let write = CountedWrite {
            sql: "INSERT INTO a SELECT * FROM unnest($1::text[]) AS u(column1)".to_owned(),
            binds: vec![SqlValue::Text("x".into())],
            width: 1,
            rows: 1,
            sees_earlier: false,
        };
        let (sql, columns) =
            as_ctes(vec![write], Finish::Then("SELECT s FROM b WHERE id = $1")).unwrap();
        assert_eq!(
            sql,
            "WITH w0 AS (INSERT INTO a SELECT * FROM unnest($1::text[]) AS u(column1) RETURNING \
             1) SELECT c.n, r.* FROM (SELECT ((SELECT count(*) FROM w0))::bigint AS n) AS c \
             LEFT JOIN (SELECT true AS found_, q.* FROM (SELECT s FROM b WHERE id = $2) AS q) \
             AS r ON true"
        );
        assert_eq!(columns.len(), 1);
    }

    /// LEDGER-53: a lone write checks its own counts, the expected sum bound after the columns,
    /// and fails naming the marker (never a value) when they fall short.
    #[test]
    fn a_lone_write_checks_its_counts_inside_the_statement() {
        let write = CountedWrite {
            sql: "INSERT INTO a SELECT * FROM unnest($1::text[]) AS u(column1)".to_owned(),
            binds: vec![SqlValue::Text("x".into())],
            width: 1,
            rows: 1,
            sees_earlier: false,
        };
        let (sql, columns) = as_ctes(vec![write], Finish::Check).unwrap();
        assert!(
            sql.ends_with(
                " SELECT CASE WHEN c.n = $2::bigint THEN c.n ELSE ('airlock_short_write ' || \
                 c.n)::bigint END AS n FROM (SELECT ((SELECT count(*) FROM w0))::bigint AS n) AS c"
            ),
            "{sql}"
        );
        assert_eq!(columns.len(), 1);
    }

    /// LEDGER-52: a batch's multi-row statement reads the same on PostgreSQL whatever its row
    /// count, so each connection prepares it once.
    #[test]
    fn a_pg_row_source_does_not_depend_on_the_row_count() {
        let row = [
            SqlValue::Text("a".into()),
            SqlValue::NullInt,
            SqlValue::Null,
        ];
        let one = pg_row_source(&row, 3);
        let rows: Vec<SqlValue> = (0..17).flat_map(|_| row.clone()).collect();
        let many = pg_row_source(&rows, 3);
        assert_eq!(one, many);
        assert_eq!(
            one,
            "SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[]) \
             AS u(column1, column2, column3)"
        );
    }

    /// The arrays keep each row's values in row order, NULLs included; a column whose rows
    /// disagree on its type is refused, not bound as something else.
    #[test]
    fn rows_become_typed_columns() {
        let binds = vec![
            SqlValue::Text("a".into()),
            SqlValue::Int(1),
            SqlValue::Null,
            SqlValue::NullInt,
        ];
        assert_eq!(
            columns(binds, 2).unwrap(),
            vec![
                Column::Text(vec![Some("a".into()), None]),
                Column::Int(vec![Some(1), None]),
            ]
        );
        let mixed = vec![SqlValue::Int(1), SqlValue::Text("secret".into())];
        let e = columns(mixed, 1).unwrap_err().to_string();
        assert!(e.contains("column 1") && !e.contains("secret"), "{e}");
    }
}
