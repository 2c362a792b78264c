//! Full-batch GCN training on a large graph: time and memory of a step
//! (compare `../shared/tools/pyg_gcn_step.py`, PyG's `GCNConv(cached=True)`
//! on the same graph).
//!
//! ```text
//! cargo run --release --example full_batch -- --nodes 1000000 --degree 10 --features 128 --json
//! # the graph of `python random_graph.py N DEG F C DIR`, as the PyG script reads it
//! cargo run --release --example full_batch -- --graph DIR --json
//! ```
//!
//! The model and step are those of the PyG script: two `GcnConv` layers
//! (hidden 64, ReLU, dropout 0.5 on the input and the hidden layer), the
//! cross-entropy over every node, Adam (lr 0.01, weight decay 5e-4).
//! `data_mb` is what the issue counts as the data: the features (f32) and
//! the edge list (two u32 per stored entry).

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use hdgcn::alloc::BlockCache;
use hdgcn::prelude::*;
use hdgcn::util::peak_rss_mb;
use hdgcn::{Error, Result};

/// Large tensors' blocks reused across steps, within the most that large
/// blocks ever took at once (`hdgcn::alloc`); `--no-block-cache` turns
/// reuse off for a comparison.
#[global_allocator]
static ALLOC: BlockCache = BlockCache::new();

#[derive(Parser, Debug)]
#[command(about = "Full-batch GCN training step on a large generated graph")]
struct Args {
    /// Read the graph written by `random_graph.py` (edges.u32, x.f32,
    /// y.u32, meta.json) instead of generating one.
    #[arg(long)]
    graph: Option<PathBuf>,
    #[arg(long, default_value_t = 1_000_000)]
    nodes: usize,
    /// Stored entries per node: every node draws `degree / 2` neighbours and
    /// the edges are used both ways (as `random_graph.py`).
    #[arg(long, default_value_t = 10)]
    degree: usize,
    #[arg(long, default_value_t = 128)]
    features: usize,
    #[arg(long, default_value_t = 10)]
    classes: usize,
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// Timed steps (after two warm-up steps).
    #[arg(long, default_value_t = 5)]
    steps: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long)]
    json: bool,
    /// Give every large block back to the system when it is freed (glibc's
    /// behaviour) instead of reusing it.
    #[arg(long)]
    no_block_cache: bool,
}

/// A graph in memory: CSR adjacency (both directions), features, labels.
struct Data {
    graph: Graph,
    x: ndarray::Array2<f32>,
    labels: Vec<usize>,
    classes: usize,
    entries: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    ALLOC.set_caching(!args.no_block_cache);
    let t = Instant::now();
    let data = match &args.graph {
        Some(dir) => read_dir(dir)?,
        None => generated(&args)?,
    };
    let load_s = t.elapsed().as_secs_f64();
    // A phase ends: loading's large temporaries go back now, not while the
    // operator build's small blocks grow the heap.
    ALLOC.release_cached();
    let (n, f) = data.x.dim();
    let data_mb = (n * f * 4 + data.entries * 8) as f64 / (1u64 << 20) as f64;
    let rss_data = peak_rss_mb();

    let cpu = Cpu::<f32>::new();
    let t = Instant::now();
    let mut graph = DeviceGraph::new(&cpu, data.graph);
    graph.gcn_operator()?; // built and cached here, not in the first step
    // The model needs nothing else from the host adjacency: free it.
    drop(graph.release_host());
    ALLOC.release_cached();
    let rss_operator = peak_rss_mb();
    let mut rng = StdRng::seed_from_u64(args.seed);
    let model = NodeClassifier::gcn(&cpu, f, args.hidden, data.classes, 0.5, &mut rng)?;
    let mut opt = AdamConfig::default().lr(0.01).weight_decay(5e-4).build()?;
    // `upload_owned`: the CPU backend keeps the array, no second copy.
    let x = Features::Dense(Tape::new(&cpu).constant(cpu.upload_owned(data.x)));
    let labels = Index::new(&cpu, &data.labels)?;
    drop(data.labels);
    let setup_s = t.elapsed().as_secs_f64();

    let mut step_ms = Vec::with_capacity(args.steps);
    let mut loss = f64::NAN;
    // The peak after the first forward pass (before its backward).
    let mut rss_forward = None;
    for step in 0..args.steps + 2 {
        let t = Instant::now();
        let tape = Tape::with_seed(&cpu, args.seed.wrapping_add(step as u64));
        let logits = model.forward(&tape, &graph, &x.on_tape(&tape))?;
        // The cross-entropy over every node (PyG's `F.cross_entropy(out, y)`).
        let l = logits.log_softmax(Axis::Cols).nll(&labels)?;
        drop(logits);
        loss = l.scalar()?;
        if step == 0 {
            rss_forward = peak_rss_mb();
        }
        let grads = l.backward()?;
        drop(tape);
        opt.step(&model.params(), &grads)?;
        if step >= 2 {
            step_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    step_ms.sort_by(f64::total_cmp);
    let median = step_ms.get(step_ms.len() / 2).copied().unwrap_or(f64::NAN);
    let peak = peak_rss_mb();
    let cache = ALLOC.stats();
    if args.json {
        let out = serde_json::json!({
            "nodes": n, "entries": data.entries, "features": f, "hidden": args.hidden,
            "classes": data.classes, "threads": rayon::current_num_threads(),
            "load_s": load_s, "setup_s": setup_s, "step_ms": median, "step_ms_all": step_ms,
            "loss": loss, "data_mb": data_mb, "peak_rss_data_mb": rss_data, "peak_rss_operator_mb": rss_operator,
            "peak_rss_forward_mb": rss_forward, "peak_rss_mb": peak,
            "block_cache": ALLOC.caching(), "block_cache_hits": cache.hits,
            "block_cache_misses": cache.misses, "block_cache_evicted": cache.evicted,
        });
        println!("{out}");
    } else {
        println!(
            "{n} nodes, {} entries, {f} features: step {median:.1} ms (median of {}), \
             loss {loss:.4}, data {data_mb:.0} MB, peak RSS {:.0} MB ({:.0} MB after loading, \
             {:.0} MB after the first forward pass)",
            data.entries,
            step_ms.len(),
            peak.unwrap_or(f64::NAN),
            rss_data.unwrap_or(f64::NAN),
            rss_forward.unwrap_or(f64::NAN),
        );
    }
    Ok(())
}

/// A graph from [`hdgcn::graph::generate`]: `degree / 2` uniform
/// out-neighbours a node, used both ways; community labels and features.
fn generated(args: &Args) -> Result<Data> {
    let g = hdgcn::graph::generate::generate(&hdgcn::graph::generate::GeneratorConfig {
        num_nodes: args.nodes,
        degree: (args.degree / 2).max(1),
        classes: args.classes,
        homophily: 0.5,
        feature_dim: args.features,
        feature_noise: 4.0,
        seed: args.seed,
        ..Default::default()
    })?;
    let graph = g.to_graph()?.symmetrized();
    Ok(Data {
        entries: graph.num_edges(),
        graph,
        x: g.features,
        labels: g.labels,
        classes: args.classes,
    })
}

/// The little-endian 4-byte words of a file, each mapped by `f`, read a
/// megabyte at a time into the result (no whole-file byte copy beside it).
fn read_words<T>(path: &Path, f: impl Fn(u32) -> T) -> Result<Vec<T>> {
    use std::io::Read;
    let io = |e| Error::io(path, e);
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len() as usize;
    if len % 4 != 0 {
        return Err(Error::format(
            path.display().to_string(),
            format!("{len} bytes is not a whole number of 4-byte values"),
        ));
    }
    let mut out = Vec::with_capacity(len / 4);
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let chunk = &mut buf[..left.min(1 << 20)];
        file.read_exact(chunk).map_err(io)?;
        out.extend(
            chunk
                .chunks_exact(4)
                .map(|c| f(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
        );
        left -= chunk.len();
    }
    Ok(out)
}

/// The files of `random_graph.py`: `meta.json` (`n`, `e`, `f`, `c`),
/// `edges.u32` (`e` pairs, sorted and unique), `x.f32` (`n x f`), `y.u32`.
fn read_dir(dir: &Path) -> Result<Data> {
    let meta_path = dir.join("meta.json");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).map_err(|e| Error::io(&meta_path, e))?)
            .map_err(|e| Error::format(meta_path.display().to_string(), e.to_string()))?;
    let field = |k: &str| {
        meta[k].as_u64().map(|v| v as usize).ok_or_else(|| {
            Error::format(meta_path.display().to_string(), format!("no integer `{k}`"))
        })
    };
    let (n, e, f, c) = (field("n")?, field("e")?, field("f")?, field("c")?);
    let edges = read_words(&dir.join("edges.u32"), |w| w)?;
    if edges.len() != 2 * e {
        return Err(Error::format(
            dir.join("edges.u32").display().to_string(),
            format!("{} values, meta.json says {e} pairs", edges.len()),
        ));
    }
    let pairs: Vec<(usize, usize)> = edges
        .chunks_exact(2)
        .map(|p| (p[0] as usize, p[1] as usize))
        .collect();
    drop(edges);
    let graph = Graph::from_edges(n, &pairs)?;
    drop(pairs);
    let xs = read_words(&dir.join("x.f32"), f32::from_bits)?;
    let x = ndarray::Array2::from_shape_vec((n, f), xs).map_err(|_| {
        Error::format(
            dir.join("x.f32").display().to_string(),
            format!("not {n} x {f} values"),
        )
    })?;
    let labels: Vec<usize> = read_words(&dir.join("y.u32"), |y| y as usize)?;
    Ok(Data {
        graph,
        x,
        labels,
        classes: c,
        entries: e,
    })
}
