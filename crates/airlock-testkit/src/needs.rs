//! The groups of tests that need something beyond Rust and a C compiler, each with the command
//! that enables it. One list, so the notice a skipping test prints, the end-of-run summary and
//! `.ci/run` (whose commands these are) say the same thing.

/// What a group of tests needs beyond Rust: each skip names one, and the end-of-run summary
/// counts skipped tests per group. The install commands are `.ci/run`'s, so a reader can do on
/// their own machine what CI does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Needs {
    /// A PostgreSQL server for the PostgreSQL half of the ledger's and the runtime's tests.
    Postgres,
    /// The official MCP TypeScript SDK (client and fixture upstream), under Node.
    TypeScriptSdk,
    /// The 2026-07-28 upstreams built with the TypeScript SDK v2.
    TypeScriptSdkV2,
    /// The official MCP conformance suite and the Node.js 22 it needs.
    ConformanceSuite,
    /// The MCP clients of docs/clients.md and the Node.js 22 they need.
    Clients,
    /// The official MCP Python SDK in its virtual environment.
    PythonSdk,
    /// Headless Chromium and chromedriver, for the inbox's browser tests.
    Chromium,
    /// strace, which proves `airlock check` does no network I/O.
    Strace,
    /// `pg_dump` and `pg_restore`, which back up and restore a PostgreSQL ledger.
    PgClient,
    /// The pinned previous release's `airlock` binary (`AIRLOCK_PREVIOUS_BIN`), for the
    /// rolling-upgrade tests.
    PreviousRelease,
}

impl Needs {
    /// Every group, in the summary's order.
    pub const ALL: [Needs; 10] = [
        Needs::Postgres,
        Needs::TypeScriptSdk,
        Needs::TypeScriptSdkV2,
        Needs::ConformanceSuite,
        Needs::Clients,
        Needs::PythonSdk,
        Needs::Chromium,
        Needs::Strace,
        Needs::PgClient,
        Needs::PreviousRelease,
    ];

    /// The group's stable name, as it is written in the run's records.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Needs::Postgres => "postgres",
            Needs::TypeScriptSdk => "typescript-sdk",
            Needs::TypeScriptSdkV2 => "typescript-sdk-v2",
            Needs::ConformanceSuite => "conformance-suite",
            Needs::Clients => "clients",
            Needs::PythonSdk => "python-sdk",
            Needs::Chromium => "chromium",
            Needs::Strace => "strace",
            Needs::PgClient => "pg-client",
            Needs::PreviousRelease => "previous-release",
        }
    }

    /// The group named `key`, if there is one.
    #[must_use]
    pub fn from_key(key: &str) -> Option<Needs> {
        Needs::ALL.into_iter().find(|needs| needs.key() == key)
    }

    /// What is missing, for a person.
    #[must_use]
    pub fn what(self) -> &'static str {
        match self {
            Needs::Postgres => {
                "PostgreSQL (AIRLOCK_TEST_DATABASE_URL) for the PostgreSQL half of the tests"
            }
            Needs::TypeScriptSdk => "the MCP TypeScript SDK (Node)",
            Needs::TypeScriptSdkV2 => "the MCP TypeScript SDK v2 upstreams (Node)",
            Needs::ConformanceSuite => "the MCP conformance suite (Node)",
            Needs::Clients => "the MCP clients of docs/clients.md (Node)",
            Needs::PythonSdk => "the MCP Python SDK venv",
            Needs::Chromium => "Chromium with its WebDriver (chromedriver)",
            Needs::Strace => "strace",
            Needs::PgClient => "pg_dump and pg_restore (PostgreSQL's client tools)",
            Needs::PreviousRelease => {
                "the pinned previous release's airlock binary (AIRLOCK_PREVIOUS_BIN, .ci/previous-release)"
            }
        }
    }

    /// The commands (run from the repository's root) or environment that enable the group.
    #[must_use]
    pub fn enable(self) -> &'static str {
        match self {
            Needs::Postgres => {
                "apt-get install -y postgresql && bash .ci/postgres.sh && \
                 export AIRLOCK_TEST_DATABASE_URL=postgres://airlock:airlock@127.0.0.1:5432/airlock_test"
            }
            Needs::TypeScriptSdk => "npm ci --prefix crates/airlock-mcp/tests/sdk",
            Needs::TypeScriptSdkV2 => "npm ci --prefix crates/airlock/tests/upstream-v2",
            Needs::ConformanceSuite => "npm ci --prefix crates/airlock/tests/conformance",
            Needs::Clients => "npm ci --prefix crates/airlock/tests/clients",
            Needs::PythonSdk => {
                "python3 -m venv crates/airlock/tests/python/.venv && \
                 crates/airlock/tests/python/.venv/bin/pip install -r crates/airlock/tests/python/requirements.txt"
            }
            Needs::Chromium => "apt-get install -y chromium chromium-driver",
            Needs::Strace => "apt-get install -y strace",
            Needs::PgClient => "apt-get install -y postgresql-client",
            Needs::PreviousRelease => "export AIRLOCK_PREVIOUS_BIN=$(bash .ci/build-previous.sh)",
        }
    }
}
