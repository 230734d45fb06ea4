//! Fuzzes the URL pre-checks and parse, the structural join and the address table, checking
//! invariants rather than only the absence of panics:
//! - an allowed URL under the default policy never connects to a non-public address;
//! - a successful join never changes the origin;
//! - a public address's dial address is itself public.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use airlock_egress::{EgressPolicy, StaticResolver, check_url, classify, join, precheck, Classification};
use libfuzzer_sys::fuzz_target;
use url::Url;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    })
}

fn check_address(addr: IpAddr) {
    if let Classification::Public { dial } = classify(addr) {
        assert!(classify(dial).is_public(), "{addr} is public but dials {dial}");
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() >= 16 {
        let bytes: [u8; 16] = data[..16].try_into().expect("16 bytes");
        check_address(IpAddr::V6(Ipv6Addr::from(bytes)));
        check_address(IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])));
    }
    let Ok(text) = std::str::from_utf8(data) else { return };

    // URL: every name resolves to a public address, so only the rules decide.
    let _ = precheck(text);
    let policy = EgressPolicy::default();
    let public: IpAddr = [93, 184, 215, 14].into();
    let resolver = StaticResolver::new();
    let host = Url::parse(text).ok().and_then(|u| u.host_str().map(str::to_owned));
    let resolver = match &host {
        Some(h) => resolver.with(h, [public]),
        None => resolver,
    };
    let report = runtime().block_on(check_url(&policy, text, &resolver));
    if let Ok(addrs) = &report.outcome {
        for a in addrs {
            assert!(classify(a.ip()).is_public(), "{text:?} allowed to {a}");
        }
    }

    // Join: the origin never changes.
    let base = Url::parse("https://api.example.com/v1").expect("base");
    if let Ok(joined) = join(&base, text) {
        assert_eq!(joined.origin(), base.origin(), "{text:?}");
        assert!(joined.username().is_empty() && joined.password().is_none());
    }
});
