//! `[telemetry]` (docs/rules.md DECL-60 … DECL-62).

use crate::support::Dir;

/// DECL-60: absent means off.
#[test]
fn no_telemetry_is_off() {
    assert_eq!(Dir::new().load().unwrap().config.telemetry, None);
}

/// DECL-60 … DECL-62: what a valid `[telemetry]` reads as, with its defaults.
#[test]
fn telemetry_settings_and_their_defaults() {
    let toml = "[telemetry]\nendpoint = \"http://127.0.0.1:4318/\"\n";
    let t = Dir::new()
        .file("airlock.toml", toml)
        .load()
        .unwrap()
        .config
        .telemetry
        .unwrap();
    assert_eq!(t.endpoint, "http://127.0.0.1:4318");
    assert_eq!(t.service_name, "airlock");
    assert!((t.sample_ratio - 1.0).abs() < f64::EPSILON);
    assert!(t.headers.is_empty());

    let toml = "[telemetry]\nendpoint = \"https://otel.example.com/otlp\"\nservice_name = \"gw-eu\"\nsample_ratio = 0.25\n[telemetry.headers]\nAuthorization = \"otel.token\"\n";
    let t = Dir::new()
        .file("airlock.toml", toml)
        .load()
        .unwrap()
        .config
        .telemetry
        .unwrap();
    assert_eq!(t.service_name, "gw-eu");
    assert!((t.sample_ratio - 0.25).abs() < f64::EPSILON);
    assert_eq!(t.headers.len(), 1);
    assert_eq!(t.headers[0].0, "authorization");
    assert_eq!(t.headers[0].1.as_str(), "otel.token");
}

/// DECL-60 … DECL-62: every problem at once, at its file, line and key.
#[test]
fn telemetry_problems_are_all_reported() {
    let toml = "[telemetry]\nendpoint = \"http://otel.example.com:4318?x=1\"\nsample_ratio = 1.5\nservice_name = \"\"\nprotocol = \"grpc\"\n[telemetry.headers]\n\"bad name\" = \"otel.a\"\nx-key = 3\n";
    let errors = Dir::new().file("airlock.toml", toml).errors();
    let expect = [
        "airlock.toml:2:1: telemetry.endpoint: ",
        "airlock.toml:3:",
        "telemetry.sample_ratio: expected a number from 0 to 1",
        "airlock.toml:4:1: telemetry.service_name: must not be empty",
        "airlock.toml:5:1: telemetry.protocol: unknown key `protocol`",
        "is not an HTTP header name",
        "telemetry.headers.x-key: expected a credential path",
    ];
    for want in expect {
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{want} not in {errors:#?}"
        );
    }
    assert_eq!(errors.len(), 6, "{errors:#?}");
}

/// DECL-60: a credential header needs https (loopback exempt).
#[test]
fn a_credential_header_needs_https() {
    let toml = "[telemetry]\nendpoint = \"http://otel.example.com:4318\"\n[telemetry.headers]\nauthorization = \"otel.token\"\n";
    let errors = Dir::new().file("airlock.toml", toml).errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].contains("telemetry.endpoint: credentials require https"));
}
