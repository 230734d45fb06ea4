//! What a statement binds ([`SqlValue`]) and a write whose affected-row count is known in
//! advance ([`CountedWrite`]): the vocabulary both backends' statement builders share.
//! Nothing here touches a database (`bound!` only binds values to a query it is given).

/// A value bound to a `$n` placeholder (in the ledger's statements and a transactional tool's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    /// SQL NULL, typed as text.
    Null,
    /// SQL NULL, typed as an integer (PostgreSQL types every parameter).
    NullInt,
    /// A 64-bit integer.
    Int(i64),
    /// Text.
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}
impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        Self::Text(v)
    }
}
impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        Self::Text(v.to_owned())
    }
}
impl From<Option<i64>> for SqlValue {
    fn from(v: Option<i64>) -> Self {
        v.map_or(Self::NullInt, Self::Int)
    }
}
impl From<Option<String>> for SqlValue {
    fn from(v: Option<String>) -> Self {
        v.map_or(Self::Null, Self::Text)
    }
}

/// A write whose affected-row count is known in advance: a batch's multi-row statements.
pub(crate) struct CountedWrite {
    pub(crate) sql: String,
    /// The rows' values, row after row, `width` each.
    pub(crate) binds: Vec<SqlValue>,
    pub(crate) width: usize,
    /// Rows the statement must affect; fewer means a row it expected was not as expected.
    pub(crate) rows: u64,
    /// Must see the rows the writes before it wrote (an update of a row inserted earlier).
    pub(crate) sees_earlier: bool,
}

/// A condition a SQLite commit also requires, checked after its last write, before `COMMIT`: a
/// boolean SQL expression with `?` placeholders for `binds`. When it is false nothing is
/// committed and the commit reports a short write (a lost race).
pub(crate) struct CommitCheck {
    pub(crate) sql: String,
    pub(crate) binds: Vec<SqlValue>,
}

/// Binds `$binds` (an iterator of [`SqlValue`] references) to the query `$q`, in order.
macro_rules! bound {
    ($q:expr, $binds:expr) => {{
        let mut q = $q;
        for b in $binds {
            q = match b {
                SqlValue::Null => q.bind(None::<String>),
                SqlValue::NullInt => q.bind(None::<i64>),
                SqlValue::Int(i) => q.bind(*i),
                SqlValue::Text(s) => q.bind(s.clone()),
            };
        }
        q
    }};
}
pub(crate) use bound;
