//! What each provider is sent: the conversation mapped to its API (docs/rules.md MODEL-2),
//! read back from the body the fake received.

use airlock_model::{ChatRequest, Message, ToolCall, ToolDef, ToolResult};
use airlock_testkit::{FakeModel, Flavor, ModelReply};
use serde_json::json;

use crate::support::{self, turn};

/// A conversation with a tool round: user, assistant calling two tools, their results.
fn conversation() -> ChatRequest {
    ChatRequest {
        model: "fake-model".into(),
        system: "Be brief.".into(),
        messages: vec![
            Message::User {
                text: "find Ada".into(),
            },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "call_a".into(),
                        name: "crm_search".into(),
                        arguments: json!({"q": "Ada"}),
                    },
                    ToolCall {
                        id: "call_b".into(),
                        name: "crm_get".into(),
                        arguments: json!({"id": 7}),
                    },
                ],
            },
            Message::ToolResults {
                results: vec![
                    ToolResult {
                        call_id: "call_a".into(),
                        content: "1 match".into(),
                        is_error: false,
                    },
                    ToolResult {
                        call_id: "call_b".into(),
                        content: "no such contact".into(),
                        is_error: true,
                    },
                ],
            },
        ],
        tools: vec![ToolDef {
            name: "crm_search".into(),
            description: "Search.".into(),
            input_schema: json!({"type": "object"}),
        }],
        max_tokens: None,
    }
}

#[tokio::test]
async fn openai_gets_tool_calls_and_tool_results_with_their_ids() {
    let fake = FakeModel::openai(vec![ModelReply::text(&["ok"])]).await;
    let (model, _) = support::model(Flavor::OpenAi, &fake);
    turn(model.as_ref(), &conversation()).await.0.unwrap();
    let received = fake.received();
    assert_eq!(received[0].path, "/v1/chat/completions");
    assert_eq!(
        received[0].headers["authorization"],
        format!("Bearer {}", FakeModel::KEY).as_str()
    );
    let body = &received[0].body;
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert!(body.get("max_tokens").is_none());
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "find Ada"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "crm_search", "arguments": "{\"q\":\"Ada\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "crm_get", "arguments": "{\"id\":7}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": "1 match"},
            {"role": "tool", "tool_call_id": "call_b", "content": "no such contact"}
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "crm_search", "description": "Search.", "parameters": {"type": "object"}}}])
    );
}

#[tokio::test]
async fn anthropic_gets_tool_use_and_tool_result_blocks_with_their_ids() {
    let fake = FakeModel::anthropic(vec![ModelReply::text(&["ok"])]).await;
    let (model, _) = support::model(Flavor::Anthropic, &fake);
    turn(model.as_ref(), &conversation()).await.0.unwrap();
    let received = fake.received();
    assert_eq!(received[0].path, "/v1/messages");
    assert_eq!(received[0].headers["x-api-key"], FakeModel::KEY);
    assert_eq!(received[0].headers["anthropic-version"], "2023-06-01");
    assert!(received[0].headers.get("authorization").is_none());
    let body = &received[0].body;
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "find Ada"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_a", "name": "crm_search", "input": {"q": "Ada"}},
                {"type": "tool_use", "id": "call_b", "name": "crm_get", "input": {"id": 7}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "1 match", "is_error": false},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "no such contact", "is_error": true}
            ]}
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "crm_search", "description": "Search.", "input_schema": {"type": "object"}}])
    );
}

#[tokio::test]
async fn a_local_openai_compatible_server_needs_no_key() {
    let fake = FakeModel::start(Flavor::OpenAi, None, vec![ModelReply::text(&["hi"])]).await;
    let client = support::client(support::loopback_allowed());
    let spec = support::spec(Flavor::OpenAi, fake.endpoint());
    let model = airlock_model::connect(&spec, client, None).unwrap();
    let mut request = support::ask("hello");
    request.max_tokens = Some(64);
    assert_eq!(turn(model.as_ref(), &request).await.0.unwrap().text, "hi");
    let received = fake.received();
    assert!(received[0].headers.get("authorization").is_none());
    assert_eq!(received[0].body["max_tokens"], 64);
}

#[tokio::test]
async fn anthropic_without_a_key_is_a_configuration_error() {
    let client = support::client(support::loopback_allowed());
    let spec = support::spec(Flavor::Anthropic, "http://127.0.0.1:9/v1".into());
    let error = airlock_model::connect(&spec, client, None).unwrap_err();
    assert_eq!(error.kind, airlock_model::ModelErrorKind::Configuration);
    assert!(error.message.contains("spec.model.credential"), "{error}");
}
