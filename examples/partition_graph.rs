//! Times METIS on a generated graph (issue 71 item 4) and prints the edge
//! cut against a hashed (random-like) partition's.
//!
//! `cargo run --release --features metis --example partition_graph -- NODES DEGREE PARTS`
//! (defaults: 1000000 10 100). Measure memory with `/usr/bin/time -v`.

use hdgcn::graph::generate::{GeneratorConfig, generate};
use hdgcn::graph::partition::metis_partition;
use std::time::Instant;

fn main() -> hdgcn::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: usize| -> usize {
        args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
    };
    let (nodes, degree, parts) = (arg(0, 1_000_000), arg(1, 10), arg(2, 100));
    let g = generate(&GeneratorConfig {
        num_nodes: nodes,
        degree,
        classes: 10,
        feature_dim: 0,
        seed: 42,
        ..GeneratorConfig::default()
    })?;
    let graph = g.to_graph()?.symmetrized();
    let t = Instant::now();
    let part = metis_partition(&graph, parts, 0)?;
    let secs = t.elapsed().as_secs_f64();
    let cut = |p: &dyn Fn(usize) -> usize| {
        let cross = graph
            .adjacency()
            .iter()
            .filter(|(_, (s, d))| p(*s) != p(*d));
        cross.count() as f64 / graph.num_edges() as f64
    };
    let mut sizes = vec![0usize; parts];
    for &p in &part {
        sizes[p] += 1;
    }
    println!(
        "{{\"nodes\": {nodes}, \"edges\": {}, \"parts\": {parts}, \"metis_s\": {secs:.3}, \"cut_fraction\": {:.4}, \"hashed_cut_fraction\": {:.4}, \"min_part\": {}, \"max_part\": {}, \"peak_rss_mb\": {:.0}}}",
        graph.num_edges(),
        cut(&|v| part[v]),
        cut(&|v| v.wrapping_mul(0x9E37_79B9) % parts),
        sizes.iter().min().unwrap_or(&0),
        sizes.iter().max().unwrap_or(&0),
        hdgcn::util::peak_rss_mb().unwrap_or(f64::NAN)
    );
    Ok(())
}
