//! The scripted model (docs/rules.md MODEL-10 to MODEL-13).

use std::path::PathBuf;

use airlock_model::{ChatRequest, Message, ModelErrorKind, ToolCall, ToolResult};
use airlock_spec::{ModelScript, ModelSpec, ScriptedCall, ScriptedConversation, ScriptedTurn};
use serde_json::json;

use crate::support::{self, turn};

fn script() -> ModelScript {
    ModelScript {
        file: PathBuf::from("scripts/offline.yml"),
        conversations: vec![
            ScriptedConversation {
                when_input_contains: Some("weather".into()),
                turns: vec![ScriptedTurn::Answer("Sunny.".into())],
            },
            ScriptedConversation {
                when_input_contains: None,
                turns: vec![
                    ScriptedTurn::Call {
                        text: "Searching.".into(),
                        calls: vec![
                            ScriptedCall {
                                tool: "crm_search".into(),
                                arguments: json!({"q": "Ada"}),
                            },
                            ScriptedCall {
                                tool: "crm_get".into(),
                                arguments: json!({"id": 7}),
                            },
                        ],
                    },
                    ScriptedTurn::Answer("Ada is contact 7.".into()),
                ],
            },
        ],
    }
}

fn model() -> std::sync::Arc<dyn airlock_model::Model> {
    let spec = ModelSpec {
        provider: "scripted".into(),
        model: "scripted".into(),
        endpoint: None,
        credential: None,
        script: Some(script()),
    };
    // A scripted model reaches nothing: even a client that allows nothing serves.
    let client = support::client(airlock_egress::EgressPolicy::default());
    airlock_model::connect(&spec, client, None).unwrap()
}

fn after_first_turn() -> ChatRequest {
    let mut request = support::ask("find Ada");
    request.messages.push(Message::Assistant {
        text: "Searching.".into(),
        tool_calls: vec![],
    });
    request.messages.push(Message::ToolResults {
        results: vec![ToolResult {
            call_id: "call_0_0".into(),
            content: "1 match".into(),
            is_error: false,
        }],
    });
    request
}

#[tokio::test]
async fn turns_are_chosen_by_the_number_of_assistant_messages() {
    let model = model();
    let (first, pieces) = turn(model.as_ref(), &support::ask("find Ada")).await;
    let first = first.unwrap();
    assert_eq!(pieces, ["Searching."]);
    assert_eq!(
        first.tool_calls,
        [
            ToolCall {
                id: "call_0_0".into(),
                name: "crm_search".into(),
                arguments: json!({"q": "Ada"}),
            },
            ToolCall {
                id: "call_0_1".into(),
                name: "crm_get".into(),
                arguments: json!({"id": 7}),
            },
        ]
    );
    // Asked again with the same conversation (a resumed run), it answers the same.
    let (again, _) = turn(model.as_ref(), &support::ask("find Ada")).await;
    assert_eq!(again.unwrap(), first);
    let (second, pieces) = turn(model.as_ref(), &after_first_turn()).await;
    let second = second.unwrap();
    assert_eq!(second.text, "Ada is contact 7.");
    assert!(second.tool_calls.is_empty());
    assert_eq!(pieces, ["Ada is contact 7."]);
}

#[tokio::test]
async fn the_input_chooses_the_conversation() {
    let (answer, _) = turn(model().as_ref(), &support::ask("What's the WEATHER?")).await;
    assert_eq!(answer.unwrap().text, "Sunny.");
}

#[tokio::test]
async fn a_conversation_longer_than_its_script_is_a_clear_error() {
    let mut request = after_first_turn();
    request.messages.push(Message::Assistant {
        text: "Ada is contact 7.".into(),
        tool_calls: vec![],
    });
    request.messages.push(Message::User {
        text: "and Grace?".into(),
    });
    let error = turn(model().as_ref(), &request).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Configuration);
    assert_eq!(
        error.message,
        "the script scripts/offline.yml has 2 turn(s) for this conversation and the model was asked for turn 3"
    );
}
