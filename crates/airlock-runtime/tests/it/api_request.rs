//! Request building for api tools, with literal expected URLs and bodies.

use airlock_runtime::ToolErrorKind;
use airlock_runtime::api::{ApiRequest, build_request};
use airlock_runtime::arguments::prepare_arguments;
use airlock_spec::{ApiAuth, ApiConnection, ApiOperation, CredentialPath, Credentials, Method};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const SECRET: &str = "s3cr3t-t0ken";

fn op(path: &str) -> ApiOperation {
    ApiOperation {
        slug: "erp-cliente".into(),
        operation: "buscar_cliente".into(),
        connection: "erp_main".into(),
        auth: ApiAuth::Bearer,
        method: Method::Get,
        path: path.into(),
        query: Vec::new(),
        body: None,
        allow_slashes: Vec::new(),
        select: None,
    }
}

fn conn(base: &str) -> ApiConnection {
    ApiConnection {
        // A loopback test upstream: the operator vouches for it (EGRESS-38).
        use_egress_allow: true,
        base_url: base.into(),
        credential: Some(CredentialPath::try_from("erp.token").unwrap()),
        per_principal: None,
    }
}

fn creds() -> Credentials {
    Credentials::from_pairs([
        ("erp.token".to_owned(), SECRET.to_owned()),
        ("erp.basic.username".to_owned(), "ada".to_owned()),
        ("erp.basic.password".to_owned(), "pa:ss".to_owned()),
    ])
}

fn args(v: Value) -> Map<String, Value> {
    let Value::Object(m) = v else {
        panic!("object")
    };
    m
}

fn build(op: &ApiOperation, a: Value) -> Result<ApiRequest, airlock_runtime::ToolError> {
    build_request(op, &conn("https://api.example.com"), &creds(), &args(a))
}

fn header<'r>(r: &'r ApiRequest, name: &str) -> Option<&'r str> {
    r.headers()
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.expose())
}

#[test]
fn seed_example_builds_the_query() {
    let mut o = op("/clientes");
    o.query = vec![("cuit".into(), "{cuit}".into())];
    let r = build(&o, json!({"cuit": "30-12345678-9"})).unwrap();
    assert_eq!(
        r.url().as_str(),
        "https://api.example.com/clientes?cuit=30-12345678-9"
    );
    assert_eq!(r.method(), Method::Get);
    assert!(r.body().is_none());
    assert!(r.carries_credential());
}

#[test]
fn path_values_are_encoded_and_checked() {
    let o = op("/clientes/{id}");
    let r = build(&o, json!({"id": "a b&c"})).unwrap();
    assert_eq!(
        r.url().as_str(),
        "https://api.example.com/clientes/a%20b%26c"
    );
    let r = build(&o, json!({"id": 42})).unwrap();
    assert_eq!(r.url().as_str(), "https://api.example.com/clientes/42");
    let r = build(&o, json!({"id": true})).unwrap();
    assert_eq!(r.url().as_str(), "https://api.example.com/clientes/true");
    for bad in ["a/b", "..%2F", "%252e%252e", "..", "%2e%2e%2fadmin"] {
        let e = build(&o, json!({"id": bad})).unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::BadArguments, "{bad}");
        assert!(e.message.contains("`id`"), "{}", e.message);
    }
    let e = build(&o, json!({})).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::BadArguments);
}

#[test]
fn allow_slashes_keeps_slashes_and_encodes_segments() {
    let mut o = op("/files/{path}");
    o.allow_slashes = vec!["path".into()];
    let r = build(&o, json!({"path": "docs/año 2024/a.txt"})).unwrap();
    assert_eq!(
        r.url().as_str(),
        "https://api.example.com/files/docs/a%C3%B1o%202024/a.txt"
    );
    assert!(build(&o, json!({"path": "docs/../secret"})).is_err());
}

#[test]
fn base_url_path_is_kept() {
    for base in [
        "https://api.example.com/api/v1",
        "https://api.example.com/api/v1/",
    ] {
        let r = build_request(&op("/x"), &conn(base), &creds(), &Map::new()).unwrap();
        assert_eq!(r.url().as_str(), "https://api.example.com/api/v1/x");
    }
    let r = build_request(
        &op("/x"),
        &conn("https://api.example.com:8443/"),
        &creds(),
        &Map::new(),
    )
    .unwrap();
    assert_eq!(r.url().as_str(), "https://api.example.com:8443/x");
}

#[test]
fn a_path_cannot_change_the_host() {
    for bad in ["@other.com/x", "//other.com/x", "other.com/x", "/a/../../x"] {
        let e = build(&op(bad), json!({})).unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::BadDeclaration, "{bad}");
    }
    // With the leading slash, `@` is just part of the path.
    let r = build(&op("/@other.com/x"), json!({})).unwrap();
    assert_eq!(r.url().host_str(), Some("api.example.com"));
    assert_eq!(r.url().as_str(), "https://api.example.com/@other.com/x");
}

#[test]
fn query_rules() {
    let mut o = op("/search");
    o.query = vec![
        ("q".into(), "{q}".into()),
        ("active".into(), "{active}".into()),
        ("limit".into(), "{limit}".into()),
        ("optional".into(), "{opt}".into()),
        ("filter".into(), "name:{q}".into()),
        ("fixed".into(), "v 1".into()),
    ];
    let r = build(&o, json!({"q": "a b%20c&d", "active": true, "limit": 25})).unwrap();
    assert_eq!(
        r.url().as_str(),
        "https://api.example.com/search?q=a+b%2520c%26d&active=true&limit=25&filter=name%3Aa+b%2520c%26d&fixed=v+1"
    );
    let pairs: Vec<(String, String)> = r.url().query_pairs().into_owned().collect();
    assert_eq!(
        pairs[0],
        ("q".into(), "a b%20c&d".into()),
        "decodes back to the argument"
    );
    let r = build(&o, json!({"q": "x", "active": false, "limit": 1})).unwrap();
    assert!(r.url().as_str().contains("active=false"));
}

#[test]
fn body_rules() {
    let mut o = op("/pedidos");
    o.method = Method::Post;
    o.body = Some(json!({
        "cliente": "{cliente}", "limit": "{limit}", "urgente": "{urgente}",
        "nota": "para {cliente}", "opcional": "{opt}",
        "items": ["{item}", "{opt}", {"qty": "{qty}", "x": "{opt}"}]
    }));
    let r = build(
        &o,
        json!({"cliente": "30-1", "limit": 25, "urgente": false, "item": "A", "qty": 2.5}),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(r.body().unwrap().to_vec()).unwrap(),
        r#"{"cliente":"30-1","limit":25,"urgente":false,"nota":"para 30-1","items":["A",{"qty":2.5}]}"#
    );
    assert_eq!(header(&r, "content-type"), Some("application/json"));

    o.body = Some(json!("{payload}"));
    let r = build(&o, json!({})).unwrap();
    assert!(r.body().is_none(), "one missing placeholder means no body");
    assert_eq!(header(&r, "content-type"), None);
    let r = build(&o, json!({"payload": {"a": [1, true]}})).unwrap();
    assert_eq!(r.body().unwrap(), br#"{"a":[1,true]}"#);
}

#[test]
fn defaults_then_build() {
    let schema = json!({"type": "object", "properties": {
        "limit": {"type": "integer", "default": 25}, "q": {"type": "string"}}});
    let mut o = op("/s");
    o.method = Method::Post;
    o.body = Some(json!({"limit": "{limit}", "q": "{q}"}));
    let a = prepare_arguments(&schema, &json!({})).unwrap();
    let r = build_request(&o, &conn("https://api.example.com"), &creds(), &a).unwrap();
    assert_eq!(r.body().unwrap(), br#"{"limit":25}"#);
}

#[test]
fn bearer_and_header_auth() {
    let r = build(&op("/x"), json!({})).unwrap();
    assert_eq!(header(&r, "authorization"), Some("Bearer s3cr3t-t0ken"));
    assert!(r.headers()[0].1.is_secret());
    let mut o = op("/x");
    o.auth = ApiAuth::Header("X-Api-Key".into());
    let r = build(&o, json!({})).unwrap();
    assert_eq!(header(&r, "x-api-key"), Some(SECRET));
    assert_eq!(header(&r, "authorization"), None);
}

#[test]
fn basic_auth_with_a_colon_in_the_password() {
    let mut o = op("/x");
    o.auth = ApiAuth::Basic;
    let c = ApiConnection {
        // A loopback test upstream: the operator vouches for it (EGRESS-38).
        use_egress_allow: true,
        base_url: "https://api.example.com".into(),
        credential: Some(CredentialPath::try_from("erp.basic").unwrap()),
        per_principal: None,
    };
    let r = build_request(&o, &c, &creds(), &Map::new()).unwrap();
    // base64("ada:pa:ss")
    assert_eq!(header(&r, "authorization"), Some("Basic YWRhOnBhOnNz"));
    // A single value where a mapping is needed is a credential_missing error.
    let e = build(&o, json!({})).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::CredentialMissing);
    assert!(!e.message.contains(SECRET));
}

#[test]
fn query_auth_overrides_a_declared_parameter() {
    let mut o = op("/x");
    o.auth = ApiAuth::Query("api_key".into());
    o.query = vec![("api_key".into(), "{k}".into()), ("a".into(), "1".into())];
    let r = build(&o, json!({"k": "model-chosen"})).unwrap();
    assert_eq!(
        r.url().as_str(),
        "https://api.example.com/x?a=1&api_key=s3cr3t-t0ken"
    );
    assert!(r.headers().is_empty());
    assert_eq!(
        r.redacted_url(),
        "https://api.example.com/x?a=1&api_key=%5Bredacted%5D"
    );
    let debug = format!("{r:?}");
    assert!(!debug.contains(SECRET), "{debug}");
}

#[test]
fn debug_never_shows_the_credential() {
    let r = build(&op("/x"), json!({})).unwrap();
    let debug = format!("{r:?}");
    assert!(debug.contains("[redacted]"), "{debug}");
    assert!(!debug.contains(SECRET), "{debug}");
}

#[test]
fn missing_credential_names_connection_and_path() {
    let empty = Credentials::from_pairs([("other.path".to_owned(), SECRET.to_owned())]);
    let e = build_request(
        &op("/x"),
        &conn("https://api.example.com"),
        &empty,
        &Map::new(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::CredentialMissing);
    assert!(e.message.contains("erp_main"), "{}", e.message);
    assert!(e.message.contains("erp.token"), "{}", e.message);
    assert!(!e.message.contains(SECRET));
    let none = ApiConnection {
        // A loopback test upstream: the operator vouches for it (EGRESS-38).
        use_egress_allow: true,
        base_url: "https://api.example.com".into(),
        credential: None,
        per_principal: None,
    };
    let e = build_request(&op("/x"), &none, &creds(), &Map::new()).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::CredentialMissing);
    assert!(e.message.contains("erp_main"), "{}", e.message);
}

#[test]
fn a_credential_with_a_newline_is_refused_without_echo() {
    let bad = Credentials::from_pairs([("erp.token".to_owned(), "abc\r\nX-Evil: 1".to_owned())]);
    let e = build_request(
        &op("/x"),
        &conn("https://api.example.com"),
        &bad,
        &Map::new(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::CredentialMissing);
    assert!(!e.message.contains("X-Evil"), "{}", e.message);
}

proptest! {
    #[test]
    fn any_string_argument_keeps_the_host(value in any::<String>()) {
        let mut o = op("/c/{id}");
        o.allow_slashes = vec!["id".into()];
        o.query = vec![("q".into(), "{id}".into()), ("e".into(), "x{id}y".into())];
        if let Ok(r) = build(&o, json!({"id": value})) {
            prop_assert_eq!(r.url().host_str(), Some("api.example.com"));
            prop_assert_eq!(r.url().port_or_known_default(), Some(443));
            prop_assert!(r.url().path().starts_with("/c/"));
        }
        let mut o = op("/{id}");
        o.method = Method::Post;
        o.body = Some(json!({"v": "{id}"}));
        if let Ok(r) = build(&o, json!({"id": value})) {
            prop_assert_eq!(r.url().host_str(), Some("api.example.com"));
        }
    }
}
