//! `[notify]` and `[server] public_url` (docs/rules.md DECL-55 … DECL-59).

use airlock_spec::{NotifyEvent, Referenced, SLACK_API};

use crate::support::Dir;

/// DECL-55, DECL-56, DECL-57: what a valid `[notify]` reads as, with its defaults.
#[test]
fn notify_settings_and_their_defaults() {
    let toml = "[server]\npublic_url = \"https://airlock.example.com/\"\n[[notify.webhooks]]\nurl = \"https://hooks.example.com/a\"\nsecret = \"hooks.a\"\n[[notify.webhooks]]\nurl = \"http://127.0.0.1:9000/b\"\nsecret = \"hooks.b\"\nprevious_secrets = [\"hooks.b_old\", \"hooks.b_older\"]\nevents = [\"invocation.in_doubt\"]\n[notify.slack]\nbot_token = \"slack.bot\"\nsigning_secret = \"slack.signing\"\nchannel = \"C1\"\ndeciders = [\"U1\"]\n";
    let loaded = Dir::new().file("airlock.toml", toml).load().unwrap();
    // DECL-58: a rotated-out secret is a credential `airlock check` resolves, like `secret`.
    let old = loaded
        .references
        .iter()
        .find(|r| r.key == "notify.webhooks[1].previous_secrets[0]")
        .unwrap();
    assert!(matches!(&old.target, Referenced::Credential(p) if p.as_str() == "hooks.b_old"));
    let config = loaded.config;
    assert_eq!(
        config.public_url.as_deref(),
        Some("https://airlock.example.com")
    );
    let hooks = &config.notify.webhooks;
    assert_eq!(hooks[0].events, NotifyEvent::ALL.to_vec());
    assert_eq!(hooks[1].events, [NotifyEvent::InDoubt]);
    assert_eq!(hooks[1].secret.as_str(), "hooks.b");
    assert!(hooks[0].previous_secrets.is_empty());
    let previous: Vec<&str> = hooks[1]
        .previous_secrets
        .iter()
        .map(|p| p.as_str())
        .collect();
    assert_eq!(previous, ["hooks.b_old", "hooks.b_older"]);
    let slack = config.notify.slack.unwrap();
    assert_eq!(slack.api_base, SLACK_API);
    assert_eq!(slack.deciders, ["U1"]);
}

/// DECL-55: nothing configured is nothing to tell.
#[test]
fn no_notify_is_empty() {
    let config = Dir::new().load().unwrap().config;
    assert!(config.notify.is_empty());
    assert_eq!(config.public_url, None);
}

/// DECL-55 … DECL-59: every problem at once, at its key.
#[test]
fn notify_problems_are_all_reported() {
    let toml = "[server]\npublic_url = \"ftp://x\"\n[[notify.webhooks]]\nurl = \"http://hooks.example.com/a\"\nsecret = \"hooks.a\"\nevents = [\"invocation.parked\", \"invocation.started\"]\n[[notify.webhooks]]\nurl = \"https://hooks.example.com/b\"\nprevious_secrets = [\"hooks.b\", 7]\n[notify.slack]\nbot_token = \"slack.bot\"\nsigning_secret = \"slack.signing\"\nchannel = \"C1\"\nteam = \"T1\"\n";
    let errors = Dir::new().file("airlock.toml", toml).errors();
    let expect = [
        "airlock.toml:2:1: server.public_url: `ftp://x` is not an http(s) URL",
        "airlock.toml:4:1: notify.webhooks[0].url: credentials require https",
        "notify.webhooks[0].events: ",
        "notify.webhooks[1].secret: `secret` is required",
        "notify.webhooks[1].previous_secrets[1]: expected a credential path",
        "airlock.toml:14:1: notify.slack.team: unknown key `team`",
    ];
    assert_eq!(errors.len(), expect.len(), "{errors:#?}");
    for want in expect {
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{want} not in {errors:#?}"
        );
    }
}
