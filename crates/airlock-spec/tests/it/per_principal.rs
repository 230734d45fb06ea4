//! `per_principal = true` on `[connections.<name>]` (docs/rules.md DECL-91 … DECL-93): where
//! each principal's credential comes from, and every mistake named at its key.

use airlock_spec::{ExchangeGrant, PerPrincipal};

use crate::support::{Dir, agent};

const OAUTH: &str = "[server]\npublic_url = \"https://airlock.example.com\"\n[connections.crm]\nbase_url = \"https://crm.example.com\"\nper_principal = true\n[connections.crm.oauth]\nauthorization_endpoint = \"https://id.example.com/authorize\"\ntoken_endpoint = \"https://id.example.com/token\"\nclient_id = \"airlock\"\nclient_secret = \"crm.client_secret\"\nscopes = [\"crm.read\"]\n";

const TOOLS: &str = "    - name: crm\n      type: api\n      connection: crm\n      auth: { scheme: bearer }\n      operations:\n        - name: total\n          description: The total.\n          writes: false\n          request: { method: GET, path: /total }\n";

/// DECL-91: a per-principal connection loads without a shared credential, and a bearer tool on
/// it passes the auth check (its credential is each principal's).
#[test]
fn decl_91_each_source_loads_and_a_bearer_tool_accepts_it() {
    let stored =
        "[connections.crm]\nbase_url = \"https://crm.example.com\"\nper_principal = true\n";
    let dir = Dir::new()
        .file("airlock.toml", stored)
        .file("agents/s.yml", &agent("s", TOOLS));
    let deployment = dir.load().unwrap();
    let crm = &deployment.config.connections["crm"];
    assert_eq!(crm.per_principal, Some(PerPrincipal::Stored));
    assert!(crm.credential.is_none());

    let dir = Dir::new().file("airlock.toml", OAUTH);
    let config = dir.load().unwrap().config;
    let Some(PerPrincipal::OAuth(oauth)) = &config.connections["crm"].per_principal else {
        panic!("oauth expected: {:?}", config.connections["crm"]);
    };
    assert_eq!(oauth.client_id, "airlock");
    assert_eq!(oauth.scopes, ["crm.read"]);
    assert_eq!(
        oauth.client_secret.as_ref().unwrap().as_str(),
        "crm.client_secret"
    );
}

/// DECL-92: a shared `credential`, two sources, `oauth` without `per_principal` or without a
/// public URL, and a plaintext endpoint are refused, all at once, each at its key.
#[test]
fn decl_92_every_wrong_source_is_named_at_its_key() {
    let bad = "[connections.crm]\nbase_url = \"https://crm.example.com\"\nper_principal = true\ncredential = \"crm.token\"\n[connections.crm.oauth]\nauthorization_endpoint = \"http://id.example.com/a\"\ntoken_endpoint = \"https://id.example.com/t\"\n[connections.crm.token_exchange]\ngrant = \"jwt_bearer\"\ntoken_endpoint = \"https://id.example.com/t\"\nclient_id = \"c\"\n[connections.erp]\nbase_url = \"https://erp.example.com\"\n[connections.erp.oauth]\nclient_id = \"c\"\n";
    let errors = Dir::new().file("airlock.toml", bad).errors();
    let expect = [
        "connections.crm.oauth: `oauth` needs `[server] public_url`",
        "connections.crm.token_exchange: `token_exchange` needs `[mcp.oauth]`",
        "connections.crm.credential: `credential` is not allowed with `per_principal = true`",
        "connections.crm.token_exchange: `oauth` and `token_exchange` cannot both be set",
        "connections.erp.oauth: `oauth` needs `per_principal = true`",
    ];
    for e in expect {
        assert!(errors.iter().any(|x| x.contains(e)), "{e}\n{errors:#?}");
    }
    assert_eq!(errors.len(), expect.len(), "{errors:#?}");

    let plain = OAUTH.replace(
        "https://id.example.com/token",
        "http://id.example.com/token",
    );
    let errors = Dir::new().file("airlock.toml", &plain).errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("connections.crm.oauth.token_endpoint: credentials require https"),
        "{errors:#?}"
    );
}

/// DECL-93: a token exchange names its grant; an actor token comes with the subject `may_act`
/// must name, and only RFC 8693 takes an audience or an actor.
#[test]
fn decl_93_a_token_exchange_is_read_and_checked() {
    let head = "[mcp]\n[mcp.oauth]\nissuer = \"https://id.example.com\"\nresource = \"https://airlock.example.com\"\n[mcp.oauth.scopes]\n\"mcp:tools\" = [\"gateway\"]\n[connections.crm]\nbase_url = \"https://crm.example.com\"\nper_principal = true\n[connections.crm.token_exchange]\ntoken_endpoint = \"https://id.example.com/token\"\nclient_id = \"airlock\"\n";
    let good = format!(
        "{head}grant = \"token_exchange\"\naudience = \"https://crm.example.com\"\nactor_token = \"airlock.actor\"\nactor = \"airlock\"\n"
    );
    let config = Dir::new()
        .file("airlock.toml", &good)
        .load()
        .unwrap()
        .config;
    let Some(PerPrincipal::Exchange(e)) = &config.connections["crm"].per_principal else {
        panic!("exchange expected");
    };
    assert_eq!(e.grant, ExchangeGrant::TokenExchange);
    assert_eq!(e.actor.as_deref(), Some("airlock"));

    let cases = [
        ("grant = \"password\"\n", "unknown grant `password`"),
        (
            "grant = \"token_exchange\"\nactor_token = \"airlock.actor\"\n",
            "connections.crm.token_exchange.actor_token: `actor_token` and `actor` go together",
        ),
        (
            "grant = \"jwt_bearer\"\naudience = \"x\"\n",
            "connections.crm.token_exchange.audience: `audience` belongs to `grant = \"token_exchange\"`",
        ),
    ];
    for (tail, expected) in cases {
        let errors = Dir::new()
            .file("airlock.toml", &format!("{head}{tail}"))
            .errors();
        assert_eq!(errors.len(), 1, "{tail}: {errors:#?}");
        assert!(errors[0].contains(expected), "{tail}: {errors:#?}");
    }
}

/// DECL-94: per-principal credentials on a PostgreSQL ledger without a shared vault key load,
/// with a warning naming the key to set; with the key, or on SQLite, no warning.
#[test]
fn decl_94_replicas_on_postgres_are_told_to_share_the_vault_key() {
    let base = "[connections.crm]\nbase_url = \"https://crm.example.com\"\nper_principal = true\n";
    let pg = format!("database_url = \"postgres://airlock@db.example.com/airlock\"\n{base}");
    let warned = Dir::new()
        .file("airlock.toml", &pg)
        .load()
        .unwrap()
        .warnings;
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].reason.contains("set one shared `vault_key`"),
        "{warned:?}"
    );
    let keyed = format!("{pg}[credentials]\nvault_key = \"airlock.vault_key\"\n");
    assert!(
        Dir::new()
            .file("airlock.toml", &keyed)
            .load()
            .unwrap()
            .warnings
            .is_empty()
    );
    assert!(
        Dir::new()
            .file("airlock.toml", base)
            .load()
            .unwrap()
            .warnings
            .is_empty()
    );
}
