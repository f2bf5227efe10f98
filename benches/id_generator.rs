//! Ids per second from one generator in-process, no I/O: each id reads the system clock
//! and takes a compare-and-swap (`cargo bench --bench id_generator`). The layout's ceiling
//! is 16,384 ids per millisecond per worker; the target is 10 million per second.

use std::time::{SystemTime, UNIX_EPOCH};

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use routekey_proxy::id::IdLayout;
use routekey_proxy::id::generator::{Generator, Step};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One id, waiting (spinning) when the millisecond is used up.
fn issue(g: &Generator, route_key: u8) -> u64 {
    loop {
        match g.next(route_key, now_ms()) {
            Ok(Step::Id(id)) => return id,
            Ok(Step::WaitUntil(_)) => std::hint::spin_loop(),
            Err(e) => panic!("{e}"),
        }
    }
}

fn generate(c: &mut Criterion) {
    let g = Generator::new(IdLayout::default(), 3, 5);
    let mut group = c.benchmark_group("generator");
    group.throughput(Throughput::Elements(1));
    group.bench_function("next_order_id", |b| b.iter(|| issue(&g, black_box(5))));
    group.finish();
}

criterion_group!(benches, generate);
criterion_main!(benches);
