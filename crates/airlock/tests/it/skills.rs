//! docs/rules.md MCP-88 … MCP-91 and OPS-79 end to end: a loopback connection server serving
//! skills of the MCP Skills extension (SEP-2640); `airlock serve`'s endpoint relays them under
//! the connection's namespace, hands on a file only when its bytes match its skill's digest, and
//! pins every skill's entry: one whose files change is withheld across restarts until
//! `airlock tools accept` pins it.

use std::time::Duration;

use airlock_testkit::{Script, Server as Upstream};
use serde_json::{Value, json};

use crate::mcp::{ADMIN, CLAUDE, rpc};
use crate::support::{Server, cli, deployment_with};

const SKILL: &str = "skill://git-workflow/SKILL.md";
const GUIDE: &str = "skill://git-workflow/references/GUIDE.md";
const SERVED_SKILL: &str = "crm+skill://git-workflow/SKILL.md";
const SERVED_GUIDE: &str = "crm+skill://git-workflow/references/GUIDE.md";

/// Connection `crm` on the upstream at `url`, with `access` (`[[access]]` rules, or nothing).
fn deployment(url: &str, access: &str) -> tempfile::TempDir {
    let toml = format!(
        "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n{access}[egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let dir = deployment_with(
        &toml,
        &format!("airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\n"),
    );
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    let file = format!("url: {url}\n");
    std::fs::write(dir.path().join("connections/crm.yml"), file).unwrap();
    dir
}

/// The reply to one request of `method` with `params`.
async fn ask(base: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    rpc(base, Some(CLAUDE), body).await.1
}

/// The served skill URIs `skills/list` shows.
async fn skills(base: &str) -> Vec<String> {
    let list = ask(base, "skills/list", json!({})).await;
    let skills = list["result"]["skills"].as_array();
    let skills = skills.unwrap_or_else(|| panic!("{list}")).iter();
    skills
        .map(|s| s["uri"].as_str().unwrap().to_owned())
        .collect()
}

fn boot(dir: &std::path::Path) -> (Server, String) {
    let server = Server::start(dir, &[]);
    let base = format!("http://{}", server.addr);
    (server, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_88_a_connections_skills_are_relayed_namespaced_and_their_files_read_as_listed() {
    let upstream = Upstream::start(Script::default()).await;
    let hidden = "skill://deploy/SKILL.md";
    upstream.set_skill_files(&[(hidden, "Ship."), (SKILL, "Branch."), (GUIDE, "Rebase.")]);
    // MCP-88: `[[access]]` grants a skill by the prefix and its frontmatter name.
    let access = "[[access]]\nprincipals = [\"claude\"]\ntools = [\"crm__git-workflow\"]\n";
    let dir = deployment(&upstream.loopback_url(), access);
    let (_server, base) = boot(dir.path());
    let hello = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let caps = ask(&base, "initialize", hello).await["result"]["capabilities"].clone();
    assert_eq!(
        caps["extensions"]["io.modelcontextprotocol/skills"],
        json!({}),
        "{caps}"
    );

    let list = ask(&base, "skills/list", json!({})).await["result"].clone();
    let skill = &list["skills"][0];
    assert_eq!(skill["uri"], SERVED_SKILL, "{list}");
    assert_eq!(
        skill["frontmatter"],
        json!({"name": "git-workflow", "description": "A test skill."})
    );
    let files = skill["resources"].as_array().unwrap().iter();
    let files: Vec<&str> = files.map(|f| f["uri"].as_str().unwrap()).collect();
    assert_eq!(files, [SERVED_SKILL, SERVED_GUIDE]);
    let got = ask(&base, "skills/get", json!({"uri": SERVED_SKILL})).await;
    assert_eq!(got["result"]["skill"], *skill, "{got}");
    let unknown = ask(&base, "skills/get", json!({"uri": SKILL})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(unknown["error"]["data"]["uri"], SKILL, "{unknown}");
    assert_eq!(list["skills"].as_array().unwrap().len(), 1, "{list}");
    let hidden = "crm+skill://deploy/SKILL.md";
    let got = ask(&base, "skills/get", json!({"uri": hidden})).await;
    assert_eq!(got["error"]["code"], -32602, "{got}");
    let read = ask(&base, "resources/read", json!({"uri": hidden})).await;
    assert_eq!(read["error"]["code"], -32602, "{read}");

    // A file its skill lists is read through airlock, though `resources/list` names only
    // `SKILL.md` files.
    let read = ask(&base, "resources/read", json!({"uri": SERVED_GUIDE})).await;
    assert_eq!(read["result"]["contents"][0]["text"], "Rebase.", "{read}");
    assert_eq!(read["result"]["contents"][0]["uri"], SERVED_GUIDE, "{read}");

    // MCP-90: bytes that differ from the listed digest are never handed on.
    upstream.tamper_skill_file(GUIDE, "Force-push to main.");
    let read = ask(&base, "resources/read", json!({"uri": SERVED_GUIDE})).await;
    assert_eq!(read["error"]["code"], -32603, "{read}");
    assert!(
        read.to_string().contains("does not match the digest"),
        "{read}"
    );
    assert!(!read.to_string().contains("Force-push"), "{read}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_79_a_skill_whose_files_change_waits_for_an_operator_across_restarts() {
    let upstream = Upstream::start(Script::default()).await;
    let deploy = ("skill://deploy/SKILL.md", "Ship.");
    // MCP-88: a skill whose name breaks the extension's rules is neither served nor pinned.
    let malformed = ("skill://Not_A_Name/SKILL.md", "Bad.");
    upstream.set_skill_files(&[deploy, malformed, (SKILL, "Branch."), (GUIDE, "Rebase.")]);
    let dir = deployment(&upstream.loopback_url(), "");
    // First boot: trust on first use.
    let (first, base) = boot(dir.path());
    let both = ["crm+skill://deploy/SKILL.md", SERVED_SKILL];
    assert_eq!(skills(&base).await, both);
    drop(first);

    // The server changes one supporting file (its listing says so honestly) and adds a skill.
    let release = ("skill://release/SKILL.md", "Tag.");
    upstream.set_skill_files(&[deploy, release, (SKILL, "Branch."), (GUIDE, "Merge.")]);
    let (second, base) = boot(dir.path());
    second.await_log(
        &[
            "crm: skill `skill://git-workflow/SKILL.md` changed",
            "withheld",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(skills(&base).await, ["crm+skill://deploy/SKILL.md"]);
    let got = ask(&base, "skills/get", json!({"uri": SERVED_SKILL})).await;
    assert_eq!(got["error"]["code"], -32602, "{got}");
    // Its files are not read, though the server's `resources/list` names its `SKILL.md`.
    for file in [SERVED_GUIDE, SERVED_SKILL] {
        let read = ask(&base, "resources/read", json!({"uri": file})).await;
        assert_eq!(read["error"]["code"], -32602, "{read}");
        assert!(!read.to_string().contains("Merge."), "{read}");
    }
    let listed = ask(&base, "resources/list", json!({})).await.to_string();
    assert!(listed.contains("crm+skill://deploy/SKILL.md"), "{listed}");
    assert!(!listed.contains(SERVED_SKILL), "{listed}");
    drop(second);

    let out = cli(dir.path(), &["tools", "diff"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report = String::from_utf8_lossy(&out.stdout);
    for line in [
        "crm: skill `skill://git-workflow/SKILL.md` changed its files or frontmatter",
        "crm: skill `skill://release/SKILL.md` is new",
    ] {
        assert!(report.contains(line), "{line} / {report}");
    }
    let accept = ["tools", "accept", "crm", SKILL, "--as", "alice"];
    let out = cli(dir.path(), &accept);
    assert!(out.status.success(), "{out:?}");
    let (_third, base) = boot(dir.path());
    assert_eq!(skills(&base).await, both);
    let read = ask(&base, "resources/read", json!({"uri": SERVED_GUIDE})).await;
    assert_eq!(read["result"]["contents"][0]["text"], "Merge.", "{read}");

    // A pinned skill the server stops listing is reported removed.
    upstream.set_skill_files(&[release, (SKILL, "Branch."), (GUIDE, "Merge.")]);
    let out = cli(dir.path(), &["tools", "diff"]);
    let report = String::from_utf8_lossy(&out.stdout);
    let removed = "crm: skill `skill://deploy/SKILL.md` was removed by the server";
    assert!(report.contains(removed), "{report}");
}
