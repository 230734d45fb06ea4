//! Clients, specs and sinks for the provider tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
use airlock_model::{ChatRequest, Message, Model, ModelError, Retry, Sleep, Turn};
use airlock_spec::ModelSpec;
use airlock_testkit::{FakeModel, Flavor};
use futures::future::BoxFuture;
use secrecy::SecretString;

/// Records every wait and returns at once: retries cost no real time.
#[derive(Debug, Default)]
pub(crate) struct Waits(Mutex<Vec<Duration>>);

impl Waits {
    pub(crate) fn all(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

impl Sleep for Waits {
    fn sleep(&self, delay: Duration) -> BoxFuture<'static, ()> {
        self.0.lock().unwrap().push(delay);
        Box::pin(std::future::ready(()))
    }
}

/// A policy that reaches 127.0.0.1 only because the operator allowed it.
pub(crate) fn loopback_allowed() -> EgressPolicy {
    EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        ..EgressPolicy::default()
    }
}

pub(crate) fn client(policy: EgressPolicy) -> GuardedClient {
    GuardedClient::builder(policy)
        .resolver(Arc::new(StaticResolver::new()))
        .build()
        .unwrap()
}

pub(crate) fn spec(flavor: Flavor, endpoint: String) -> ModelSpec {
    let provider = match flavor {
        Flavor::OpenAi => "openai",
        Flavor::Anthropic => "anthropic",
    };
    ModelSpec {
        provider: provider.into(),
        model: "fake-model".into(),
        endpoint: Some(endpoint),
        credential: None,
        script: None,
    }
}

/// A model for `fake` with the fake's key, `policy`, and waits recorded in the returned
/// [`Waits`]; `attempts` requests per turn at most.
pub(crate) fn model_with(
    flavor: Flavor,
    fake: &FakeModel,
    policy: EgressPolicy,
    attempts: u32,
) -> (Arc<dyn Model>, Arc<Waits>) {
    model_at(flavor, fake.endpoint(), policy, attempts)
}

/// As [`model_with`], for any endpoint (the key is the fakes').
pub(crate) fn model_at(
    flavor: Flavor,
    endpoint: String,
    policy: EgressPolicy,
    attempts: u32,
) -> (Arc<dyn Model>, Arc<Waits>) {
    let waits = Arc::new(Waits::default());
    let retry = Retry {
        attempts,
        sleep: waits.clone(),
        ..Retry::default()
    };
    let key = Some(SecretString::from(FakeModel::KEY.to_owned()));
    let model =
        airlock_model::connect_with(&spec(flavor, endpoint), client(policy), key, retry).unwrap();
    (model, waits)
}

pub(crate) fn model(flavor: Flavor, fake: &FakeModel) -> (Arc<dyn Model>, Arc<Waits>) {
    model_with(flavor, fake, loopback_allowed(), 4)
}

pub(crate) fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "fake-model".into(),
        system: "You are a test.".into(),
        messages: vec![Message::User { text: text.into() }],
        tools: Vec::new(),
        max_tokens: None,
    }
}

/// Runs one turn, returning it and every piece the sink got, in order.
pub(crate) async fn turn(
    model: &dyn Model,
    request: &ChatRequest,
) -> (Result<Turn, ModelError>, Vec<String>) {
    let pieces = Mutex::new(Vec::new());
    let sink = |piece: &str| pieces.lock().unwrap().push(piece.to_owned());
    let result = model.turn(request, &sink).await;
    (result, pieces.into_inner().unwrap())
}
