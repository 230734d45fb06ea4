//! "Connect your account" (docs/rules.md CALL-15): the authorization-code flow with PKCE that
//! gives a person's connected account to a per-principal connection.
//!
//! Guarantees: a flow starts only from a ticket airlock sealed for one (connection, principal)
//! — handed to that principal's own authenticated request, or printed by the operator's CLI —
//! and valid for [`TICKET_TTL`]; the `state` sent to the authorization server is sealed too,
//! names the same (connection, principal), carries the PKCE verifier (so any replica can finish
//! the flow, and nobody who sees the state learns the verifier), is valid for [`STATE_TTL`] and is
//! used once (a replayed callback is refused before it reaches the server); the tokens redeemed are stored for exactly that principal, sealed, and release
//! the calls that waited for them. Tickets, states, codes and tokens appear in no log or error.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use airlock_ledger::InvocationId;
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};
use url::Url;

use super::sources::Source;
use super::{PersonalVault, VaultError};
use crate::oauth::PkceVerifier;

/// How long a connect link is valid.
pub const TICKET_TTL: Duration = Duration::from_secs(15 * 60);
/// How long a person has to approve at the authorization server.
pub const STATE_TTL: Duration = Duration::from_secs(10 * 60);

const TICKET: &[u8] = b"airlock connect ticket";
const STATE: &[u8] = b"airlock connect state";

/// Why a connect flow could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The link or the state is not one airlock made, was changed, or is for another
    /// connection.
    #[error(
        "this connect link is not valid (changed, or for another connection): ask for a new one"
    )]
    Invalid,
    /// It ran out.
    #[error("this connect link has expired: ask for a new one")]
    Expired,
    /// Its callback was used already (a reloaded page): the account was connected then, or
    /// the attempt failed then.
    #[error(
        "this connect link was used already: if the account is not connected, ask for a new link"
    )]
    Used,
    /// The connection does not connect accounts, or the deployment has no public URL.
    #[error("{0}")]
    NotConnectable(String),
    /// The authorization server refused the code, or could not be reached.
    #[error("the authorization server did not give the account's tokens: {0}")]
    Redeem(String),
    /// Storing the tokens failed.
    #[error(transparent)]
    Vault(#[from] VaultError),
}

#[derive(Serialize, Deserialize)]
struct Ticket {
    c: String,
    p: String,
    exp: u64,
}

#[derive(Serialize, Deserialize)]
struct State {
    c: String,
    p: String,
    v: String,
    exp: u64,
    /// Used once (LEDGER-85).
    n: String,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl PersonalVault {
    /// This server's public origin, under which the connect routes are.
    fn public_base(&self) -> Result<&str, ConnectError> {
        let base = self.public_url.as_deref().ok_or_else(|| {
            ConnectError::NotConnectable(
                "connecting an account needs `[server] public_url`".to_owned(),
            )
        })?;
        Ok(base.trim_end_matches('/'))
    }

    /// Where the authorization server sends the person back.
    fn redirect_uri(&self) -> Result<String, ConnectError> {
        Ok(format!("{}/v1/connect/callback", self.public_base()?))
    }

    fn server(&self, connection: &str) -> Result<&crate::oauth::AuthorizationServer, ConnectError> {
        match self.declared.get(connection) {
            Some(Source::OAuth(server)) => Ok(server),
            _ => Err(ConnectError::NotConnectable(format!(
                "connection `{connection}` does not connect accounts (it has no `oauth`)"
            ))),
        }
    }

    /// A link that starts connecting `principal`'s account to `connection`, valid for
    /// [`TICKET_TTL`]; give it only to that principal.
    ///
    /// # Errors
    /// A connection without `oauth`, a deployment without a public URL.
    pub fn connect_link(&self, connection: &str, principal: &str) -> Result<Url, ConnectError> {
        self.server(connection)?;
        let base = self.public_base()?;
        let ticket = Ticket {
            c: connection.to_owned(),
            p: principal.to_owned(),
            exp: now() + TICKET_TTL.as_secs(),
        };
        let sealed = self.seal_json(TICKET, &ticket)?;
        let mut url = Url::parse(&format!("{base}/v1/connect/"))
            .and_then(|u| u.join(connection))
            .map_err(|e| ConnectError::NotConnectable(format!("the public URL: {e}")))?;
        url.query_pairs_mut().append_pair("ticket", &sealed);
        Ok(url)
    }

    /// Where to send the person holding `ticket` to approve at `connection`'s authorization
    /// server.
    ///
    /// # Errors
    /// A ticket airlock did not make for `connection`, or an expired one.
    pub fn begin_connect(&self, connection: &str, ticket: &str) -> Result<Url, ConnectError> {
        let server = self.server(connection)?;
        let ticket: Ticket = self.open_json(TICKET, ticket)?;
        if ticket.c != connection {
            return Err(ConnectError::Invalid);
        }
        if ticket.exp < now() {
            return Err(ConnectError::Expired);
        }
        let verifier = PkceVerifier::generate();
        let state = State {
            c: ticket.c,
            p: ticket.p,
            v: verifier.secret().expose_secret().to_owned(),
            exp: now() + STATE_TTL.as_secs(),
            n: uuid::Uuid::new_v4().to_string(),
        };
        let state = self.seal_json(STATE, &state)?;
        Ok(server.authorize_url(&self.redirect_uri()?, &state, &verifier))
    }

    /// Finishes a flow: redeems `code` for the tokens of the person `state` names, stores them
    /// and releases the calls that waited; returns the connection, the principal and those
    /// calls.
    ///
    /// # Errors
    /// A state airlock did not make or that expired; a code the server refused.
    pub async fn finish_connect(
        &self,
        state: &str,
        code: &str,
    ) -> Result<(String, String, Vec<InvocationId>), ConnectError> {
        let state: State = self.open_json(STATE, state)?;
        if state.exp < now() {
            return Err(ConnectError::Expired);
        }
        let server = self.server(&state.c)?;
        let verifier =
            PkceVerifier::from_secret(SecretString::from(state.v)).ok_or(ConnectError::Invalid)?;
        // A replayed callback never reaches the server (which could revoke what the first
        // redemption issued).
        let fresh = self
            .store
            .use_connect_state(state.n)
            .await
            .map_err(|e| ConnectError::Vault(VaultError::Ledger(e)))?;
        if !fresh {
            return Err(ConnectError::Used);
        }
        let tokens = server
            .redeem(&self.guard, code, &verifier, &self.redirect_uri()?)
            .await
            .map_err(|e| ConnectError::Redeem(e.to_string()))?;
        let released = self
            .store_tokens(&state.c, &state.p, &tokens, &state.p)
            .await?;
        Ok((state.c, state.p, released))
    }

    fn seal_json<T: Serialize>(&self, context: &[u8], value: &T) -> Result<String, ConnectError> {
        let text =
            zeroize::Zeroizing::new(serde_json::to_vec(value).map_err(|_| ConnectError::Invalid)?);
        Ok(self.keys.seal(context, &text)?)
    }

    fn open_json<T: for<'de> Deserialize<'de>>(
        &self,
        context: &[u8],
        sealed: &str,
    ) -> Result<T, ConnectError> {
        let plain = self
            .keys
            .open(context, sealed)
            .map_err(|_| ConnectError::Invalid)?;
        serde_json::from_slice(&plain).map_err(|_| ConnectError::Invalid)
    }
}
