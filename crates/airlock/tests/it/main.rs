//! End-to-end tests of the `airlock` command.

#![allow(clippy::unwrap_used, missing_docs)]

mod access;
mod apis;
mod approvals_cli;
mod audit_export;
mod backup;
mod big_calls;
mod boundaries;
mod call;
mod call_key;
mod check;
mod check_gate;
mod cli;
mod clients;
mod conformance;
mod content;
mod crash;
mod credentials;
mod credentials_api;
mod decisions;
mod discovery;
mod edit;
mod egress;
mod inbox;
mod inbox_browser;
mod inbox_credentials;
mod installed;
mod keys;
mod limits;
mod logs;
mod mcp;
mod mcp_asked;
mod mcp_mrtr;
mod mcp_notices;
mod mcp_relay;
mod mcp_relayed_tasks;
mod mcp_tasks;
mod notify;
mod oauth;
mod offers;
mod personal;
mod personal_connect;
mod pins;
mod python_sdk;
mod quickstart;
mod replicas;
mod runs;
mod serve;
mod shutdown;
mod skills;
mod subscriptions;
mod support;
mod telemetry;
mod telemetry_runs;
mod upgrade;
mod vault_cli;
mod words;

use std::path::PathBuf;
use std::process::{Command, Output};

pub(crate) fn airlock() -> Command {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
}

pub(crate) fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
