//! The committed examples: `quickstart` loads; `invalid` yields exactly the golden error list.

use airlock_spec::{Deployment, SourceKind};

use crate::support::examples;

#[test]
fn quickstart_loads_every_declaration_kind() {
    let d = Deployment::load(&examples().join("quickstart")).unwrap();
    // The quickstart runs offline: no connection file is loaded (optional/ is not read).
    assert!(d.connections.is_empty(), "{:?}", d.connections);
    let support = d.agent_scope("support").unwrap();
    let kinds: Vec<SourceKind> = support.tools().iter().map(|t| t.source.kind()).collect();
    for kind in [
        SourceKind::Api,
        SourceKind::Mcp,
        SourceKind::Agent,
        SourceKind::Builtin,
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let names: Vec<&str> = support
        .tools()
        .iter()
        .map(|t| t.definition.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "erp_cliente_buscar_cliente",
            "erp_cliente_crear_pedido",
            "soporte_buscar_ticket",
            "orders",
            "ask_human"
        ]
    );
}

/// The optional connection file of the quickstart is valid once moved into `connections/`.
#[test]
fn quickstart_optional_connection_loads_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let quickstart = examples().join("quickstart");
    std::fs::copy(
        quickstart.join("airlock.toml"),
        dir.path().join("airlock.toml"),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    std::fs::copy(
        quickstart.join("optional/crm.yml"),
        dir.path().join("connections/crm.yml"),
    )
    .unwrap();
    let d = Deployment::load(dir.path()).unwrap();
    assert_eq!(d.connections.len(), 1);
    assert_eq!(d.connections[0].namespace, "crm");
}

#[test]
fn invalid_yields_exactly_the_golden_error_list() {
    let dir = examples().join("invalid");
    let errors = Deployment::load(&dir).unwrap_err();
    let actual: String = errors.0.iter().map(|i| format!("{i}\n")).collect();
    let golden = dir.join("expected-errors.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(
        actual, expected,
        "run with UPDATE_GOLDEN=1 to accept the new list"
    );
}

#[test]
fn every_invalid_file_reports_its_own_problem() {
    let dir = examples().join("invalid");
    let errors = Deployment::load(&dir).unwrap_err();
    // Files that are valid on purpose: an empty connection file is ignored (DECL-9), and
    // loopback is exempt from the https rule.
    let valid = [
        "connections/empty_is_ignored.yml",
        "connections/localhost_http_ok.yml",
    ];
    for sub in ["agents", "connections"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let rel = format!("{sub}/{}", entry.unwrap().file_name().to_string_lossy());
            let count = errors
                .0
                .iter()
                .filter(|i| i.file.to_string_lossy() == rel)
                .count();
            if valid.contains(&rel.as_str()) {
                assert_eq!(count, 0, "{rel} should load");
            } else {
                assert_eq!(count, 1, "{rel} should break exactly one rule");
            }
        }
    }
}

/// The quickstart's offline agent runs on its bundled script (docs/rules.md MODEL-10).
#[test]
fn quickstart_tour_agent_is_scripted() {
    let d = Deployment::load(&examples().join("quickstart")).unwrap();
    let model = &d.agents["tour"].model;
    assert_eq!(model.provider, "scripted");
    let script = model.script.as_ref().unwrap();
    assert_eq!(script.file, std::path::Path::new("scripts/tour.yml"));
    let fetch = script.conversation_for("please FETCH example.com").unwrap();
    assert_eq!(fetch.turns.len(), 2);
}
