//! The behaviour both HTTP providers share, each test run against the OpenAI-compatible fake
//! and the Anthropic fake (docs/rules.md MODEL-2 to MODEL-8).

use std::time::Duration;

use airlock_egress::EgressPolicy;
use airlock_model::{ModelErrorKind, ToolCall, Usage};
use airlock_testkit::{
    FAKE_INPUT_TOKENS, FAKE_OUTPUT_TOKENS, FakeCall, FakeModel, Flavor, ModelReply,
};
use serde_json::json;

use crate::support::{self, ask, turn};

/// One test per flavor: `name::openai` and `name::anthropic`.
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn openai() {
                super::$name(airlock_testkit::Flavor::OpenAi).await;
            }
            #[tokio::test]
            async fn anthropic() {
                super::$name(airlock_testkit::Flavor::Anthropic).await;
            }
        }
    )*};
}

both!(
    a_text_turn_streams_its_pieces_in_order,
    parallel_tool_calls_are_put_together_from_pieces,
    a_429_is_retried_after_its_retry_after,
    a_500_is_retried_then_fails_with_the_providers_status_and_message,
    a_400_is_not_retried,
    a_malformed_stream_fails_without_retry,
    a_stalled_stream_times_out,
    a_loopback_provider_needs_the_operators_allow,
    the_key_never_appears_in_an_error,
    a_wrong_key_is_a_provider_error,
    a_connection_refused_is_retried_then_unreachable,
    a_stream_cut_before_any_text_is_retried,
    a_stream_cut_after_text_is_never_retried,
    a_retry_after_past_the_deadline_ends_the_turn,
);

async fn fake(flavor: Flavor, replies: Vec<ModelReply>) -> FakeModel {
    FakeModel::start(flavor, Some(FakeModel::KEY), replies).await
}

async fn a_text_turn_streams_its_pieces_in_order(flavor: Flavor) {
    let fake = fake(flavor, vec![ModelReply::text(&["Hel", "lo, ", "wörld"])]).await;
    let (model, _) = support::model(flavor, &fake);
    let (result, pieces) = turn(model.as_ref(), &ask("hi")).await;
    let turn = result.unwrap();
    assert_eq!(pieces, ["Hel", "lo, ", "wörld"]);
    assert_eq!(turn.text, "Hello, wörld");
    assert!(turn.tool_calls.is_empty());
    assert_eq!(
        turn.usage,
        Usage {
            input_tokens: FAKE_INPUT_TOKENS,
            output_tokens: FAKE_OUTPUT_TOKENS
        }
    );
    assert_eq!(fake.requests(), 1);
}

async fn parallel_tool_calls_are_put_together_from_pieces(flavor: Flavor) {
    let calls = vec![
        FakeCall::new("call_a", "crm_search", &json!({"q": "Ada Lovelace"})),
        FakeCall::new("call_b", "crm_get", &json!({"id": 7, "fields": ["name"]})),
    ];
    let replies = vec![
        ModelReply::ToolCalls {
            text: vec!["Looking.".into()],
            calls,
        },
        ModelReply::text(&["Found her."]),
    ];
    let fake = fake(flavor, replies).await;
    let (model, _) = support::model(flavor, &fake);
    let (first, pieces) = turn(model.as_ref(), &ask("find Ada")).await;
    let first = first.unwrap();
    assert_eq!(pieces, ["Looking."]);
    assert_eq!(
        first.tool_calls,
        [
            ToolCall {
                id: "call_a".into(),
                name: "crm_search".into(),
                arguments: json!({"q": "Ada Lovelace"}),
            },
            ToolCall {
                id: "call_b".into(),
                name: "crm_get".into(),
                arguments: json!({"id": 7, "fields": ["name"]}),
            },
        ]
    );
    // A run sums its turns' usage.
    let (second, _) = turn(model.as_ref(), &ask("find Ada")).await;
    let mut usage = first.usage;
    usage += second.unwrap().usage;
    assert_eq!(usage.input_tokens, 2 * FAKE_INPUT_TOKENS);
    assert_eq!(usage.output_tokens, 2 * FAKE_OUTPUT_TOKENS);
}

async fn a_429_is_retried_after_its_retry_after(flavor: Flavor) {
    let replies = vec![
        ModelReply::Error {
            status: 429,
            message: "slow down".into(),
            retry_after: Some("2".into()),
        },
        ModelReply::text(&["ok"]),
    ];
    let fake = fake(flavor, replies).await;
    let (model, waits) = support::model(flavor, &fake);
    let (result, _) = turn(model.as_ref(), &ask("hi")).await;
    assert_eq!(result.unwrap().text, "ok");
    assert_eq!(fake.requests(), 2);
    assert_eq!(waits.all(), [Duration::from_secs(2)]);
}

async fn a_500_is_retried_then_fails_with_the_providers_status_and_message(flavor: Flavor) {
    let replies = vec![ModelReply::error(500, "the model is overloaded"); 3];
    let fake = fake(flavor, replies).await;
    let (model, waits) = support::model_with(flavor, &fake, support::loopback_allowed(), 3);
    let (result, pieces) = turn(model.as_ref(), &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Provider);
    assert_eq!(error.status, Some(500));
    assert_eq!(error.message, "the model is overloaded");
    assert_eq!(fake.requests(), 3);
    assert!(pieces.is_empty());
    // Two waits, each full jitter under its exponential bound.
    let waits = waits.all();
    assert_eq!(waits.len(), 2);
    assert!(waits[0] <= Duration::from_millis(500) && waits[1] <= Duration::from_secs(1));
}

async fn a_400_is_not_retried(flavor: Flavor) {
    let fake = fake(flavor, vec![ModelReply::error(400, "tools[0] is invalid")]).await;
    let (model, waits) = support::model(flavor, &fake);
    let error = turn(model.as_ref(), &ask("hi")).await.0.unwrap_err();
    assert_eq!(
        (error.kind, error.status),
        (ModelErrorKind::Provider, Some(400))
    );
    assert_eq!(error.message, "tools[0] is invalid");
    assert_eq!(fake.requests(), 1);
    assert!(waits.all().is_empty());
}

async fn a_malformed_stream_fails_without_retry(flavor: Flavor) {
    let fake = fake(
        flavor,
        vec![ModelReply::Malformed, ModelReply::text(&["x"])],
    )
    .await;
    let (model, _) = support::model(flavor, &fake);
    let error = turn(model.as_ref(), &ask("hi")).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Malformed, "{error}");
    assert_eq!(fake.requests(), 1);
}

async fn a_stalled_stream_times_out(flavor: Flavor) {
    let fake = fake(flavor, vec![ModelReply::Stall, ModelReply::text(&["x"])]).await;
    let policy = EgressPolicy {
        deadline: Duration::from_millis(300),
        ..support::loopback_allowed()
    };
    let (model, _) = support::model_with(flavor, &fake, policy, 4);
    let error = turn(model.as_ref(), &ask("hi")).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Timeout, "{error}");
    assert_eq!(error.message, "no answer in 300 ms");
    assert_eq!(fake.requests(), 1);
}

async fn a_loopback_provider_needs_the_operators_allow(flavor: Flavor) {
    let fake = fake(flavor, vec![ModelReply::text(&["x"])]).await;
    let (model, _) = support::model_with(flavor, &fake, EgressPolicy::default(), 4);
    let error = turn(model.as_ref(), &ask("hi")).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Blocked, "{error}");
    assert_eq!(fake.requests(), 0);
}

async fn the_key_never_appears_in_an_error(flavor: Flavor) {
    let fake = fake(flavor, vec![ModelReply::EchoKey]).await;
    let (model, _) = support::model(flavor, &fake);
    let error = turn(model.as_ref(), &ask("hi")).await.0.unwrap_err();
    assert_eq!(error.status, Some(401));
    assert_eq!(error.message, "Incorrect API key provided: [redacted]");
    for shown in [
        error.to_string(),
        format!("{error:?}"),
        format!("{model:?}"),
    ] {
        assert!(!shown.contains(FakeModel::KEY), "{shown}");
    }
}

async fn a_wrong_key_is_a_provider_error(flavor: Flavor) {
    let fake = FakeModel::start(flavor, Some("another-key"), vec![]).await;
    let (model, waits) = support::model(flavor, &fake);
    let error = turn(model.as_ref(), &ask("hi")).await.0.unwrap_err();
    assert_eq!(
        (error.kind, error.status),
        (ModelErrorKind::Provider, Some(401))
    );
    assert_eq!(error.message, "invalid credential");
    // MODEL-14: the status is shown with the message.
    assert_eq!(
        error.to_string(),
        "provider answered 401: invalid credential"
    );
    assert!(waits.all().is_empty());
}

async fn a_connection_refused_is_retried_then_unreachable(flavor: Flavor) {
    let port = airlock_testkit::RawServer::refusing_port().await;
    let endpoint = format!("http://127.0.0.1:{port}/v1");
    let (model, waits) = support::model_at(flavor, endpoint, support::loopback_allowed(), 4);
    let error = turn(model.as_ref(), &ask("hi")).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Unreachable, "{error}");
    assert_eq!(waits.all().len(), 3, "four attempts, three waits");
}

async fn a_stream_cut_before_any_text_is_retried(flavor: Flavor) {
    let replies = vec![ModelReply::Broken(vec![]), ModelReply::text(&["whole"])];
    let fake = fake(flavor, replies).await;
    let (model, waits) = support::model(flavor, &fake);
    let (result, pieces) = turn(model.as_ref(), &ask("hi")).await;
    assert_eq!(result.unwrap().text, "whole");
    assert_eq!(pieces, ["whole"]);
    assert_eq!(fake.requests(), 2);
    assert_eq!(waits.all().len(), 1);
}

async fn a_stream_cut_after_text_is_never_retried(flavor: Flavor) {
    let replies = vec![
        ModelReply::Broken(vec!["Half an ".into()]),
        ModelReply::text(&["again"]),
    ];
    let fake = fake(flavor, replies).await;
    let (model, waits) = support::model(flavor, &fake);
    // The fake cuts the connection once the first piece reached the sink.
    let pieces = std::sync::Mutex::new(Vec::new());
    let sink = |piece: &str| {
        pieces.lock().unwrap().push(piece.to_owned());
        fake.cut();
    };
    let result = model.turn(&ask("hi"), &sink).await;
    let pieces = pieces.into_inner().unwrap();
    let error = result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Unreachable, "{error}");
    // The person saw the streamed text once, and never a second copy.
    assert_eq!(pieces, ["Half an "]);
    assert_eq!(fake.requests(), 1);
    assert!(waits.all().is_empty());
}

async fn a_retry_after_past_the_deadline_ends_the_turn(flavor: Flavor) {
    let replies = vec![
        ModelReply::Error {
            status: 429,
            message: "come back in a minute".into(),
            retry_after: Some("20".into()),
        },
        ModelReply::text(&["too late"]),
    ];
    let fake = fake(flavor, replies).await;
    let policy = EgressPolicy {
        deadline: Duration::from_secs(5),
        ..support::loopback_allowed()
    };
    let (model, waits) = support::model_with(flavor, &fake, policy, 4);
    let error = turn(model.as_ref(), &ask("hi")).await.0.unwrap_err();
    assert_eq!(
        (error.kind, error.status),
        (ModelErrorKind::Provider, Some(429))
    );
    assert_eq!(error.message, "come back in a minute");
    assert_eq!(fake.requests(), 1);
    assert!(waits.all().is_empty());
}
