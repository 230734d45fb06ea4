//! Address classification speed (target: under 100 ns per address).

use std::hint::black_box;
use std::net::IpAddr;

use airlock_egress::classify;
use criterion::{Criterion, criterion_group, criterion_main};

fn classify_addresses(c: &mut Criterion) {
    let mut group = c.benchmark_group("classify");
    for raw in [
        "93.184.215.14",
        "10.0.0.1",
        "168.63.129.16",
        "2606:4700:4700::1111",
        "64:ff9b::a00:5",
        "::ffff:8.8.8.8",
        "fe80::1",
    ] {
        let addr: IpAddr = raw
            .parse()
            .unwrap_or_else(|_| unreachable!("a literal address"));
        group.bench_function(raw, |b| b.iter(|| classify(black_box(addr))));
    }
    group.finish();
}

criterion_group!(benches, classify_addresses);
criterion_main!(benches);
