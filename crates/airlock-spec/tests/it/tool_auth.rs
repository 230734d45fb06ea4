//! A `type: api` declaration's `effect` (reads are idempotent, writes take the declared effect,
//! DECL-88, LEDGER-71) and the agreement of a tool's `auth` with its connection's credential
//! (DECL-86, DECL-87): each refusal names file, line, key and reason, all at once.

use airlock_spec::{Effect, Scope};

use crate::support::{Dir, agent};

/// An api declaration on `connection` with `extra` keys (indented as keys of the entry) and a
/// GET read, a POST read and a POST write.
fn api(connection: &str, extra: &str) -> String {
    format!(
        "    - name: erp
      type: api
      connection: {connection}
{extra}      operations:
        - name: get
          description: Get.
          writes: false
          request: {{ method: GET, path: /x }}
        - name: search
          description: Search.
          writes: false
          request: {{ method: POST, path: /search }}
        - name: refund
          description: Refund.
          writes: true
          mode: propose
          request: {{ method: POST, path: /refunds }}
"
    )
}

fn mcp(connection: &str, extra: &str) -> String {
    format!(
        "    - name: s
      type: mcp
      connection: {connection}
      path: /mcp
{extra}      tools:
        - name: t
          description: T.
          writes: false
          input_schema: {{ type: object }}
"
    )
}

const WITHOUT_CREDENTIAL: &str = "[connections.erp_main]\nbase_url = \"https://erp.example.com\"\ncredential = \"erp.token\"\n\n[connections.open]\nbase_url = \"https://open.example.com\"\n";

fn effects(scope: &Scope) -> Vec<(String, Effect)> {
    let tools = scope.tools().iter();
    tools
        .map(|t| (t.definition.name.to_string(), t.policy.effect))
        .collect()
}

fn scope_of(tools: &str) -> Scope {
    let dir = Dir::new().file("agents/a.yml", &agent("a", tools));
    let deployment = dir.load().unwrap();
    deployment.agent_scope("a").unwrap()
}

#[test]
fn an_api_read_is_idempotent_and_a_write_takes_the_declared_effect() {
    let default = scope_of(&api("erp_main", "      auth: { scheme: bearer }\n"));
    assert_eq!(
        effects(&default),
        [
            ("erp_get".to_owned(), Effect::Idempotent),
            // A POST is never taken for a read, whatever `writes` says: it keeps the effect
            // declared (at most once by default), as the crash harness's gated POST relies on.
            ("erp_search".to_owned(), Effect::AtMostOnce),
            ("erp_refund".to_owned(), Effect::AtMostOnce),
        ]
    );
    let declared = api(
        "erp_main",
        "      auth: { scheme: bearer }\n      effect: idempotent\n",
    );
    let declared = effects(&scope_of(&declared));
    let refund = declared.iter().find(|(name, _)| name == "erp_refund");
    assert_eq!(refund, Some(&("erp_refund".to_owned(), Effect::Idempotent)));
    let search = declared.iter().find(|(name, _)| name == "erp_search");
    assert_eq!(search, Some(&("erp_search".to_owned(), Effect::Idempotent)));
    // A read declared under `effect: at_most_once` is still a read: it never waits for a person.
    let at_most_once = api(
        "erp_main",
        "      auth: { scheme: bearer }\n      effect: at_most_once\n",
    );
    let get = effects(&scope_of(&at_most_once)).into_iter().next();
    assert_eq!(get, Some(("erp_get".to_owned(), Effect::Idempotent)));
}

#[test]
fn a_bad_api_effect_names_file_line_and_key() {
    let tools = [
        api(
            "erp_main",
            "      auth: { scheme: bearer }\n      effect: sometimes\n",
        ),
        api(
            "erp_main",
            "      auth: { scheme: bearer }\n      effect: transactional\n",
        )
        .replace("name: erp\n", "name: erp-two\n"),
    ]
    .concat();
    let errors = Dir::new()
        .file("agents/a.yml", &agent("a", &tools))
        .errors();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0]
            .starts_with("agents/a.yml:13:7: spec.tools[0].effect: \"sometimes\" is not one of"),
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with(
            "agents/a.yml:32:7: spec.tools[1].effect: `transactional` is not available"
        ),
        "{errors:#?}"
    );
}

#[test]
fn a_tool_on_a_credentialed_connection_without_auth_is_refused_at_its_entry() {
    // Both problems of the file at once, each at its entry's place and `auth` key.
    let tools = [mcp("soporte_mcp", ""), api("erp_main", "")].concat();
    let errors = Dir::new()
        .file("agents/a.yml", &agent("a", &tools))
        .errors();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].starts_with("agents/a.yml:9:7: spec.tools[0].auth: connection `soporte_mcp` has a credential, but this tool declares no `auth`"),
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with("agents/a.yml:18:7: spec.tools[1].auth: `auth` is required"),
        "{errors:#?}"
    );
}

#[test]
fn auth_scheme_none_is_accepted_with_or_without_a_credential() {
    let none = "      auth: { scheme: none }\n";
    let tools = [
        api("erp_main", none),
        api("open", none).replace("name: erp\n", "name: open-api\n"),
        mcp("soporte_mcp", none),
        mcp("open", "").replace("name: s\n", "name: open-mcp\n"),
    ]
    .concat();
    let dir = Dir::new()
        .file("airlock.toml", WITHOUT_CREDENTIAL)
        .file("agents/a.yml", &agent("a", &tools));
    // `soporte_mcp` is the shared fixture's; declare it here too, with its credential.
    let dir = dir.file(
        "airlock.toml",
        &format!(
            "{WITHOUT_CREDENTIAL}\n[connections.soporte_mcp]\nbase_url = \"https://soporte.example.com\"\ncredential = \"soporte.token\"\n"
        ),
    );
    let deployment = dir.load().unwrap();
    assert_eq!(deployment.agent_scope("a").unwrap().tools().len(), 8);
}

#[test]
fn an_auth_that_sends_a_credential_its_connection_lacks_is_refused() {
    let tools = [
        api("open", "      auth: { scheme: bearer }\n"),
        mcp("open", "      auth: { scheme: header, header: X-Key }\n"),
    ]
    .concat();
    let errors = Dir::new()
        .file("airlock.toml", WITHOUT_CREDENTIAL)
        .file("agents/a.yml", &agent("a", &tools))
        .errors();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    let reason = "`[connections.open]` in airlock.toml names no `credential`";
    assert!(
        errors[0].starts_with("agents/a.yml:12:7: spec.tools[0].auth: this `auth` sends connection `open`'s credential")
            && errors[0].contains(reason),
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with("agents/a.yml:31:7: spec.tools[1].auth:")
            && errors[1].contains(reason),
        "{errors:#?}"
    );
}
