//! `provider: scripted` manifests and their script files (docs/rules.md MODEL-10).

use airlock_spec::ScriptedTurn;

use crate::support::Dir;

fn scripted(model: &str) -> String {
    format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: offline\nspec:\n  model:\n{model}\n  prompts: {{ system: test }}\n"
    )
}

#[test]
fn a_scripted_model_loads_its_script_at_boot() {
    let dir = Dir::new()
        .file(
            "agents/offline.yml",
            &scripted("    provider: scripted\n    script: scripts/offline.yml"),
        )
        .file("scripts/offline.yml", "- answer: hello\n");
    let deployment = dir.load().unwrap();
    let model = &deployment.agents["offline"].model;
    assert_eq!(model.provider, "scripted");
    assert_eq!(model.model, "scripted");
    let script = model.script.as_ref().unwrap();
    assert_eq!(script.file, std::path::Path::new("scripts/offline.yml"));
    assert_eq!(
        script.conversation_for("hi").unwrap().turns,
        [ScriptedTurn::Answer("hello".into())]
    );
}

#[test]
fn script_keys_are_checked_with_file_line_and_key() {
    let dir = Dir::new()
        .file(
            "agents/offline.yml",
            &scripted("    provider: scripted\n    script: ../outside.yml\n    endpoint: https://api.example.com"),
        )
        .file(
            "agents/other.yml",
            &scripted("    provider: openai\n    model: gpt\n    script: scripts/x.yml")
                .replace("name: offline", "name: other"),
        )
        .file(
            "agents/missing.yml",
            &scripted("    provider: scripted\n    script: scripts/none.yml")
                .replace("name: offline", "name: missing"),
        )
        .file(
            "agents/nokey.yml",
            &scripted("    provider: scripted").replace("name: offline", "name: nokey"),
        );
    let errors = dir.errors();
    let has = |needle: &str| errors.iter().any(|e| e.contains(needle));
    assert!(
        has("agents/offline.yml:8:5: spec.model.script: `../outside.yml` is not a relative path"),
        "{errors:#?}"
    );
    assert!(
        has("agents/offline.yml:9:5: spec.model.endpoint: a scripted model reaches no provider"),
        "{errors:#?}"
    );
    assert!(
        has(
            "agents/other.yml:9:5: spec.model.script: `script` is read only for `provider: scripted`"
        ),
        "{errors:#?}"
    );
    assert!(
        has("agents/missing.yml:8:5: spec.model.script: `scripts/none.yml` is not a file"),
        "{errors:#?}"
    );
    assert!(
        has("agents/nokey.yml:7:5: spec.model.script: `script` is required"),
        "{errors:#?}"
    );
}

#[test]
fn problems_inside_a_script_are_reported_at_the_script() {
    let dir = Dir::new()
        .file(
            "agents/offline.yml",
            &scripted("    provider: scripted\n    script: scripts/offline.yml"),
        )
        .file(
            "scripts/offline.yml",
            "- call:\n    - tool: crm_search\n      arguments: 7\n- answer: [not, text]\n",
        );
    let errors = dir.errors();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].starts_with("scripts/offline.yml:3:7: [0].call[0].arguments: expected a mapping"),
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with("scripts/offline.yml:4:3: [1].answer: expected a string"),
        "{errors:#?}"
    );
}

#[test]
fn an_empty_script_is_refused() {
    let dir = Dir::new()
        .file(
            "agents/offline.yml",
            &scripted("    provider: scripted\n    script: scripts/offline.yml"),
        )
        .file("scripts/offline.yml", "");
    let errors = dir.errors();
    assert_eq!(
        errors,
        ["scripts/offline.yml:1:1: the script is empty: write its turns"]
    );
}
