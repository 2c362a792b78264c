//! `hdgcn::alloc::BlockCache` as this test binary's global allocator: large
//! blocks come back for the same size, zeroed when asked, within the bound,
//! and training on reused (dirty) blocks gives the same bits as without.

use std::sync::Mutex;

use hdgcn::alloc::BlockCache;
use hdgcn::graph::generate::{GeneratorConfig, generate};
use hdgcn::prelude::*;

/// 64 KiB: the tensors of the small graph below are cached.
#[global_allocator]
static ALLOC: BlockCache = BlockCache::with_threshold(64 << 10);

/// The tests read the global counts: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_freed_large_block_serves_the_next_request_of_its_size() {
    let _g = serial();
    ALLOC.set_caching(true);
    let n = 1 << 20; // 4 MiB of f32
    let a = vec![7.0f32; n];
    let addr = a.as_ptr() as usize;
    drop(a);
    let before = ALLOC.stats();
    // Non-zeroed request: the same block, its old contents.
    let mut b: Vec<f32> = Vec::with_capacity(n);
    assert_eq!(b.as_ptr() as usize, addr);
    b.resize(n, 1.0);
    drop(b);
    // Zeroed request: the same block again, zeroed.
    let c = vec![0.0f32; n];
    assert_eq!(c.as_ptr() as usize, addr);
    assert!(c.iter().all(|&v| v.to_bits() == 0));
    let after = ALLOC.stats();
    assert_eq!(after.hits - before.hits, 2);
    assert!(after.live_bytes + after.cached_bytes <= after.high_water_bytes);
    // Another size is not served from it.
    let d = vec![0u8; 4 * n + 4096];
    assert_ne!(d.as_ptr() as usize, c.as_ptr() as usize);
}

#[test]
fn growing_and_shrinking_large_blocks_keeps_the_counts() {
    let _g = serial();
    ALLOC.set_caching(true);
    let base = ALLOC.stats().live_bytes;
    let mut v: Vec<u8> = Vec::with_capacity(100 << 10);
    v.resize(100 << 10, 3);
    v.reserve_exact(1 << 20); // realloc to a larger large block
    v.resize((100 << 10) + (1 << 20), 4);
    assert!(v[..100 << 10].iter().all(|&x| x == 3));
    let cap = v.capacity();
    assert!(ALLOC.stats().live_bytes >= base + cap);
    v.truncate(1000);
    v.shrink_to_fit(); // realloc below the threshold
    assert_eq!(v.capacity(), 1000);
    assert!(v.iter().all(|&x| x == 3));
    drop(v);
    let s = ALLOC.stats();
    assert_eq!(s.live_bytes, base);
    assert!(s.live_bytes + s.cached_bytes <= s.high_water_bytes);
}

#[test]
fn turned_off_the_cache_gives_everything_back() {
    let _g = serial();
    ALLOC.set_caching(true);
    drop(vec![1u8; 1 << 20]);
    assert!(ALLOC.stats().cached_bytes > 0);
    ALLOC.set_caching(false);
    assert_eq!(ALLOC.stats().cached_bytes, 0);
    drop(vec![1u8; 1 << 20]);
    assert_eq!(ALLOC.stats().cached_bytes, 0);
    ALLOC.set_caching(true);
}

/// Five steps of a 2-layer GCN; the losses and the trained weights' bits.
fn train(cpu: &Cpu<f32>) -> (Vec<u32>, Vec<u32>) {
    let g = generate(&GeneratorConfig {
        num_nodes: 3000,
        degree: 5,
        classes: 4,
        homophily: 0.7,
        feature_dim: 64,
        seed: 3,
        ..Default::default()
    })
    .unwrap();
    let graph = DeviceGraph::new(cpu, g.to_graph().unwrap().symmetrized());
    let mut rng = StdRng::seed_from_u64(1);
    let model = NodeClassifier::gcn(cpu, 64, 64, 4, 0.5, &mut rng).unwrap();
    let mut opt = AdamConfig::default().lr(0.01).build().unwrap();
    let x = Features::Dense(Tape::new(cpu).constant(cpu.upload_owned(g.features)));
    let labels = Index::new(cpu, &g.labels).unwrap();
    let mut losses = Vec::new();
    for step in 0..5 {
        let tape = Tape::with_seed(cpu, step);
        let logits = model.forward(&tape, &graph, &x.on_tape(&tape)).unwrap();
        let l = logits.log_softmax(Axis::Cols).nll(&labels).unwrap();
        losses.push((l.scalar().unwrap() as f32).to_bits());
        let grads = l.backward().unwrap();
        opt.step(&model.params(), &grads).unwrap();
    }
    let weights = model
        .params()
        .iter()
        .flat_map(|p| p.value().iter().map(|v| v.to_bits()).collect::<Vec<_>>())
        .collect();
    (losses, weights)
}

#[test]
fn training_on_reused_blocks_gives_the_same_bits() {
    let _g = serial();
    let cpu = Cpu::<f32>::new();
    ALLOC.set_caching(false);
    let plain = train(&cpu);
    ALLOC.set_caching(true);
    let before = ALLOC.stats();
    let cached = train(&cpu);
    let after = ALLOC.stats();
    assert!(
        after.hits - before.hits > 20,
        "the step's tensors should come from the cache: {before:?} -> {after:?}"
    );
    assert_eq!(plain.0, cached.0, "losses");
    assert_eq!(plain.1, cached.1, "weights");
}
