//! The one constructor the runtime calls: a manifest's `spec.model` and the resolved credential
//! in, a [`Model`] out (docs/rules.md MODEL-1).
//!
//! Guarantees: every HTTP provider reaches its endpoint only through the given guarded client
//! (a provider on loopback needs the operator's `[egress] allow`, like any loopback host); a
//! provider that needs a credential and has none, an unknown provider, or a scripted model
//! without its script is a configuration error naming the fix, never a model that fails later.

use std::sync::Arc;

use airlock_egress::GuardedClient;
use airlock_spec::ModelSpec;
use http::HeaderName;
use http::header::AUTHORIZATION;
use secrecy::{ExposeSecret, SecretString};

use crate::anthropic::{self, Anthropic};
use crate::openai::{self, OpenAi};
use crate::retry::Retry;
use crate::scripted::Scripted;
use crate::wire::{Endpoint, Remote};
use crate::{Model, ModelError};

/// A model for `spec`, its HTTP requests sent through `client`, with the default [`Retry`].
///
/// # Errors
/// [`crate::ModelErrorKind::Configuration`]: an unknown provider, `anthropic` without a
/// credential, `scripted` without a script, a credential a header cannot carry.
pub fn connect(
    spec: &ModelSpec,
    client: GuardedClient,
    api_key: Option<SecretString>,
) -> Result<Arc<dyn Model>, ModelError> {
    connect_with(spec, client, api_key, Retry::default())
}

/// As [`connect`], retrying as `retry` says (tests inject a [`crate::Sleep`] that waits no real
/// time).
///
/// # Errors
/// As [`connect`].
pub fn connect_with(
    spec: &ModelSpec,
    client: GuardedClient,
    api_key: Option<SecretString>,
    retry: Retry,
) -> Result<Arc<dyn Model>, ModelError> {
    match spec.provider.as_str() {
        "scripted" => {
            let script = spec.script.clone().ok_or_else(|| {
                ModelError::configuration("a scripted model needs `spec.model.script`")
            })?;
            Ok(Arc::new(Scripted { script }))
        }
        "openai" => {
            let mut headers = Vec::new();
            // A local server (Ollama, vLLM) may need no key: then no Authorization is sent.
            if let Some(key) = &api_key {
                let value = format!("Bearer {}", key.expose_secret());
                headers.push((AUTHORIZATION, Endpoint::secret_header(&value)?));
            }
            let url = join(spec, openai::DEFAULT_ENDPOINT, "chat/completions");
            let endpoint = Endpoint {
                client,
                url,
                headers,
                key: api_key,
                retry,
            };
            Ok(Arc::new(Remote::<OpenAi>::new(endpoint)))
        }
        "anthropic" => {
            let Some(key) = api_key else {
                return Err(ModelError::configuration(
                    "the anthropic provider needs an API key: set `spec.model.credential`",
                ));
            };
            let headers = vec![
                (
                    HeaderName::from_static("x-api-key"),
                    Endpoint::secret_header(key.expose_secret())?,
                ),
                (
                    HeaderName::from_static("anthropic-version"),
                    http::HeaderValue::from_static(anthropic::API_VERSION),
                ),
            ];
            let url = join(spec, anthropic::DEFAULT_ENDPOINT, "messages");
            let endpoint = Endpoint {
                client,
                url,
                headers,
                key: Some(key),
                retry,
            };
            Ok(Arc::new(Remote::<Anthropic>::new(endpoint)))
        }
        other => Err(ModelError::configuration(format!(
            "`{other}` is not a model provider; use one of: {}",
            airlock_spec::PROVIDERS.join(", ")
        ))),
    }
}

/// `{endpoint}/{path}`, the endpoint defaulting to the provider's public API.
fn join(spec: &ModelSpec, default: &str, path: &str) -> String {
    let base = spec.endpoint.as_deref().unwrap_or(default);
    format!("{}/{path}", base.trim_end_matches('/'))
}
