//! Typed identifiers: an invocation id can never be passed where a run id is expected.
//!
//! Ids are UUIDv7, so ordering by id follows creation time; they are stored as hyphenated text.
//! The exception is a session derived from a client's own key ([`SessionId::derived`]).

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh, time-ordered id (UUIDv7).
            #[must_use]
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// The underlying UUID.
            #[must_use]
            pub fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

id_type! {
    /// Identifies one invocation (one tool call, one ledger row).
    InvocationId
}
id_type! {
    /// Identifies a session (a conversation, a channel thread, one MCP endpoint call).
    SessionId
}
id_type! {
    /// Identifies one run of an agent.
    RunId
}

impl SessionId {
    /// The session id of `seed`, the same in every process and after any restart: a UUIDv8
    /// holding the first 122 bits of the seed's SHA-256. For a session a client names itself
    /// (an MCP call key); a fresh session is [`SessionId::new`].
    #[must_use]
    pub fn derived(seed: &str) -> Self {
        let digest = airlock_spec::sha256_hex(seed.as_bytes());
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(digest.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).unwrap_or_default();
            *byte = u8::from_str_radix(pair, 16).unwrap_or_default();
        }
        Self(uuid::Builder::from_custom_bytes(bytes).into_uuid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_derived_session_id_depends_on_its_seed_alone() {
        let a = SessionId::derived("[\"mcp\",\"ada\",\"gateway\",\"k1\"]");
        assert_eq!(
            a,
            SessionId::derived("[\"mcp\",\"ada\",\"gateway\",\"k1\"]")
        );
        assert_ne!(
            a,
            SessionId::derived("[\"mcp\",\"bob\",\"gateway\",\"k1\"]")
        );
        assert_eq!(a.as_uuid().get_version_num(), 8);
        assert_eq!(a.to_string().parse::<SessionId>().unwrap(), a);
    }
}
