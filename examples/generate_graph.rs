//! Times `hdgcn::graph::generate` (issue 71 item 2) and prints what it made.
//!
//! `cargo run --release --example generate_graph -- NODES DEGREE uniform|rmat FEATURES`
//! (defaults: 1000000 10 uniform 0). Measure memory with `/usr/bin/time -v`.

use hdgcn::graph::generate::{GeneratorConfig, Topology, generate};
use std::time::Instant;

fn main() -> hdgcn::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: usize| -> usize {
        args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
    };
    let topology = match args.get(2).map(String::as_str) {
        Some("rmat") => Topology::RMAT,
        _ => Topology::Uniform,
    };
    let cfg = GeneratorConfig {
        num_nodes: arg(0, 1_000_000),
        degree: arg(1, 10),
        topology,
        classes: 10,
        feature_dim: arg(3, 0),
        seed: 42,
        ..GeneratorConfig::default()
    };
    let t = Instant::now();
    let g = generate(&cfg)?;
    let secs = t.elapsed().as_secs_f64();
    let out = g.out_degrees();
    let max_out = out.iter().max().copied().unwrap_or(0);
    let max_in = g.in_degrees().iter().max().copied().unwrap_or(0);
    println!(
        "{{\"nodes\": {}, \"edges\": {}, \"topology\": \"{:?}\", \"features\": {}, \"generate_s\": {:.3}, \"homophily\": {:.4}, \"max_out_degree\": {}, \"max_in_degree\": {}, \"threads\": {}}}",
        g.num_nodes,
        g.edges.len(),
        cfg.topology,
        g.features.ncols(),
        secs,
        g.edge_homophily(),
        max_out,
        max_in,
        rayon::current_num_threads()
    );
    Ok(())
}
