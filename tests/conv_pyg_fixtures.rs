//! GcnConv and ChebConv against PyTorch Geometric 2.8.1 (float64 outputs
//! recorded in `tests/fixtures/conv_*.json`, see `tests/fixtures/README.md`).
//!
//! Every fixture is loaded through the public API only: the graph from
//! `edge_index` (`[0]` = source, `[1]` = target) and `edge_weight`, PyG's
//! `(out x in)` weights transposed into this crate's `(in x out)`, and the
//! recorded `out` compared entry by entry.

use std::path::{Path, PathBuf};

use hdgcn::autograd::Tape;
use hdgcn::backend::Cpu;
use hdgcn::conv::{ChebConv, ChebConvConfig, DeviceGraph, GcnConv, GraphConv};
use hdgcn::graph::{Batch, Graph, LambdaMax, Normalization};
use ndarray::Array2;
use rand::{SeedableRng, rngs::StdRng};
use serde_json::Value;

mod common;
use common::max_abs_diff;

type C = Cpu<f64>;

/// Required agreement with PyG (float64 on both sides; ~1e-15 expected).
const TOL: f64 = 1e-5;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn conv_fixtures() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixture directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("conv_") && name.ends_with(".json") && name != "conv_versions.json"
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read fixture");
            let v: Value = serde_json::from_str(&text).expect("fixture is JSON");
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("index") as usize)
        .collect()
}

fn matrix(v: &Value) -> Array2<f64> {
    let rows: Vec<Vec<f64>> = v.as_array().expect("rows").iter().map(f64s).collect();
    let (r, c) = (rows.len(), rows[0].len());
    Array2::from_shape_fn((r, c), |(i, j)| rows[i][j])
}

/// `(src, dst, w)` triplets from `edge_index` / `edge_weight` (weight 1 if null).
fn edges(fx: &Value) -> Vec<(usize, usize, f64)> {
    let ei = fx["edge_index"].as_array().expect("edge_index");
    let (src, dst) = (usizes(&ei[0]), usizes(&ei[1]));
    assert_eq!(src.len(), dst.len());
    let w = if fx["edge_weight"].is_null() {
        vec![1.0; src.len()]
    } else {
        f64s(&fx["edge_weight"])
    };
    assert_eq!(w.len(), src.len());
    src.into_iter()
        .zip(dst)
        .zip(w)
        .map(|((s, d), w)| (s, d, w))
        .collect()
}

/// PyG's `(out x in)` weight as this crate's `(in x out)`.
fn weight(fx: &Value, name: &str) -> Array2<f64> {
    matrix(&fx["params"][name]).t().to_owned()
}

fn bias(fx: &Value) -> Array2<f64> {
    let b = f64s(&fx["params"]["bias"]);
    Array2::from_shape_vec((1, b.len()), b).unwrap()
}

/// The fixture's graph: one [`Graph`], or a [`Batch`] of the per-graph
/// subgraphs when the fixture has a `batch` vector.
fn device_graph(cpu: &C, fx: &Value) -> DeviceGraph<C> {
    let n = fx["num_nodes"].as_u64().unwrap() as usize;
    let e = edges(fx);
    if fx["batch"].is_null() {
        return DeviceGraph::new(cpu, Graph::from_weighted_edges(n, &e).unwrap());
    }
    let batch = usizes(&fx["batch"]);
    assert_eq!(batch.len(), n);
    assert!(batch.windows(2).all(|w| w[0] <= w[1]), "batch is sorted");
    let num_graphs = batch.last().unwrap() + 1;
    let mut start = vec![0usize; num_graphs + 1];
    for &g in &batch {
        start[g + 1] += 1;
    }
    for g in 0..num_graphs {
        start[g + 1] += start[g];
    }
    let mut per: Vec<Vec<(usize, usize, f64)>> = vec![Vec::new(); num_graphs];
    for (s, d, w) in e {
        let g = batch[s];
        assert_eq!(batch[d], g, "edge across graphs");
        per[g].push((s - start[g], d - start[g], w));
    }
    let graphs: Vec<Graph> = (0..num_graphs)
        .map(|g| Graph::from_weighted_edges(start[g + 1] - start[g], &per[g]).unwrap())
        .collect();
    let b = Batch::new(&graphs).unwrap();
    assert_eq!(b.node_to_graph(), batch.as_slice());
    DeviceGraph::from_batch(cpu, &b).unwrap()
}

fn lambda_values(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(_) => f64s(v),
        Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("lambda_max_effective must be a number or a list, got {other}"),
    }
}

/// Runs the layer described by the fixture; returns our output(s) for it
/// (ChebConv: through `forward_with_lambda` and through `forward` with the
/// equivalent `LambdaMax` rule).
fn run_fixture(fx: &Value) -> Vec<(&'static str, Array2<f64>)> {
    let cpu = C::new();
    let graph = device_graph(&cpu, fx);
    let x = matrix(&fx["x"]);
    let n_in = x.ncols();
    let n_out = fx["out"][0].as_array().unwrap().len();
    let mut rng = StdRng::seed_from_u64(0);
    let tape = Tape::inference(&cpu);
    let xv = tape.constant_array(&x).into();
    match fx["layer"].as_str().unwrap() {
        "GCNConv" => {
            let conv = GcnConv::new(&cpu, n_in, n_out, &mut rng).unwrap();
            conv.lin.weight.set(weight(fx, "lin.weight")).unwrap();
            conv.bias.as_ref().unwrap().set(bias(fx)).unwrap();
            let y = conv.forward(&tape, &graph, &xv).unwrap();
            vec![("forward", y.to_array())]
        }
        "ChebConv" => {
            let k = fx["K"].as_u64().unwrap() as usize;
            let norm: Normalization = match fx["normalization"].as_str() {
                Some(s) => s.parse().unwrap(),
                None => Normalization::None,
            };
            let lambdas = lambda_values(&fx["lambda_max_effective"]);
            let mut cfg = ChebConvConfig::new(n_in, n_out, k);
            cfg.normalization = norm;
            // A single graph: the rule `Fixed(λ)` reproduces the effective value.
            // Batches: `Exact` (with `lapack`) gives each graph its true λ_max.
            cfg.lambda_max = LambdaMax::Fixed(lambdas[0]);
            let conv: ChebConv<C> = cfg.build(&cpu, &mut rng).unwrap();
            assert_eq!(conv.lins.len(), k);
            for (i, lin) in conv.lins.iter().enumerate() {
                lin.weight
                    .set(weight(fx, &format!("lins.{i}.weight")))
                    .unwrap();
            }
            conv.bias.as_ref().unwrap().set(bias(fx)).unwrap();
            let mut outs = vec![(
                "forward_with_lambda",
                conv.forward_with_lambda(&tape, &graph, &xv, &lambdas)
                    .unwrap()
                    .to_array(),
            )];
            if lambdas.len() == 1 {
                outs.push((
                    "forward",
                    conv.forward(&tape, &graph, &xv).unwrap().to_array(),
                ));
            }
            outs
        }
        other => panic!("unknown layer {other}"),
    }
}

#[test]
fn every_conv_fixture_matches_pyg() {
    let fixtures = conv_fixtures();
    assert!(
        fixtures.len() >= 21,
        "expected the committed conv fixtures, found {}",
        fixtures.len()
    );
    let mut worst = (0.0f64, String::new());
    let mut failures = Vec::new();
    for (name, fx) in &fixtures {
        let expected = matrix(&fx["out"]);
        for (how, got) in run_fixture(fx) {
            let err = max_abs_diff(&got, &expected);
            eprintln!("{name} ({how}): max abs error {err:.3e}");
            if err.is_nan() || err > TOL {
                failures.push(format!("{name} ({how}): {err:e}"));
            }
            if err > worst.0 || err.is_nan() {
                worst = (err, format!("{name} ({how})"));
            }
        }
    }
    eprintln!("worst: {:.3e} in {}", worst.0, worst.1);
    assert!(
        failures.is_empty(),
        "fixtures off by more than {TOL}: {failures:#?}"
    );
}

/// The batch fixtures' per-graph λ_max equal each graph's exact λ_max, and
/// the `Exact` rule through `forward` reproduces PyG's output.
#[cfg(feature = "lapack")]
#[test]
fn batch_fixtures_with_exact_lambda_rule() {
    for (name, fx) in conv_fixtures() {
        if fx["batch"].is_null() || fx["layer"] != "ChebConv" {
            continue;
        }
        let cpu = C::new();
        let graph = device_graph(&cpu, &fx);
        let norm: Normalization = match fx["normalization"].as_str() {
            Some(s) => s.parse().unwrap(),
            None => Normalization::None,
        };
        let recorded = lambda_values(&fx["lambda_max_effective"]);
        let exact = graph.lambda_max(norm, &LambdaMax::Exact).unwrap();
        for (a, b) in exact.iter().zip(&recorded) {
            assert!(
                (a - b).abs() < 1e-10,
                "{name}: exact λ {exact:?} vs {recorded:?}"
            );
        }
        let x = matrix(&fx["x"]);
        let k = fx["K"].as_u64().unwrap() as usize;
        let mut cfg = ChebConvConfig::new(x.ncols(), 3, k);
        cfg.normalization = norm;
        cfg.lambda_max = LambdaMax::Exact;
        let conv: ChebConv<C> = cfg.build(&cpu, &mut StdRng::seed_from_u64(0)).unwrap();
        for (i, lin) in conv.lins.iter().enumerate() {
            lin.weight
                .set(weight(&fx, &format!("lins.{i}.weight")))
                .unwrap();
        }
        conv.bias.as_ref().unwrap().set(bias(&fx)).unwrap();
        let tape = Tape::inference(&cpu);
        let y = conv
            .forward(&tape, &graph, &tape.constant_array(&x).into())
            .unwrap();
        let err = max_abs_diff(&y.to_array(), &matrix(&fx["out"]));
        eprintln!("{name} (forward, Exact): max abs error {err:.3e}");
        assert!(err <= TOL, "{name}: {err:e}");
    }
}

/// PyG's message passing written as scatter loops over the edge list
/// (`out[dst] += w_e · x[src]`), for graphs the fixtures do not cover:
/// directed edges, where operator direction and the degree side matter.
mod scatter_reference {
    use ndarray::Array2;

    pub fn propagate(n: usize, e: &[(usize, usize, f64)], x: &Array2<f64>) -> Array2<f64> {
        let mut out = Array2::zeros((n, x.ncols()));
        for &(s, d, w) in e {
            let row = x.row(s).to_owned() * w;
            let mut o = out.row_mut(d);
            o += &row;
        }
        out
    }

    fn inv_sqrt(x: f64) -> f64 {
        if x > 0.0 { 1.0 / x.sqrt() } else { 0.0 }
    }

    /// `gcn_norm`: remaining self-loops (fill 1), degree at the target.
    pub fn gcn_edges(n: usize, e: &[(usize, usize, f64)]) -> Vec<(usize, usize, f64)> {
        let mut e = e.to_vec();
        for i in 0..n {
            if !e.iter().any(|&(s, d, _)| s == i && d == i) {
                e.push((i, i, 1.0));
            }
        }
        let mut deg = vec![0.0; n];
        for &(_, d, w) in &e {
            deg[d] += w;
        }
        e.iter()
            .map(|&(s, d, w)| (s, d, inv_sqrt(deg[s]) * w * inv_sqrt(deg[d])))
            .collect()
    }

    /// `get_laplacian(sym)` then ChebConv's `__norm__` (`2w/λ`, loops - 1).
    pub fn cheb_edges(
        n: usize,
        e: &[(usize, usize, f64)],
        lambda: f64,
    ) -> Vec<(usize, usize, f64)> {
        let mut e: Vec<_> = e.iter().copied().filter(|&(s, d, _)| s != d).collect();
        let mut deg = vec![0.0; n];
        for &(s, _, w) in &e {
            deg[s] += w;
        }
        for x in &mut e {
            x.2 = -inv_sqrt(deg[x.0]) * x.2 * inv_sqrt(deg[x.1]);
        }
        e.extend((0..n).map(|i| (i, i, 1.0)));
        e.into_iter()
            .map(|(s, d, w)| {
                let v = 2.0 * w / lambda;
                (s, d, if s == d { v - 1.0 } else { v })
            })
            .collect()
    }
}

#[test]
fn directed_graph_follows_pyg_message_direction() {
    let cpu = C::new();
    let n = 6;
    // Directed, weighted, one self-loop, node 5 with in-edges only.
    let e = vec![
        (0, 1, 1.5),
        (1, 2, 0.5),
        (2, 0, 2.0),
        (0, 3, 1.0),
        (3, 3, 0.7),
        (4, 5, 1.2),
        (3, 5, 0.3),
        (1, 0, 0.9),
    ];
    let graph = DeviceGraph::new(&cpu, Graph::from_weighted_edges(n, &e).unwrap());
    let mut rng = StdRng::seed_from_u64(5);
    let x = Array2::from_shape_fn((n, 4), |(i, j)| ((i * 7 + j * 3) % 5) as f64 - 1.7);
    let tape = Tape::inference(&cpu);
    let xv = tape.constant_array(&x).into();

    let gcn = GcnConv::with_bias(&cpu, 4, 2, false, &mut rng).unwrap();
    let got = gcn.forward(&tape, &graph, &xv).unwrap().to_array();
    let xw = x.dot(&gcn.lin.weight.to_array());
    let want = scatter_reference::propagate(n, &scatter_reference::gcn_edges(n, &e), &xw);
    let err = max_abs_diff(&got, &want);
    assert!(err < 1e-12, "GcnConv on a directed graph: {err:e}");

    let lambda = 1.7;
    let mut cfg = ChebConvConfig::new(4, 2, 3);
    cfg.bias = false;
    let cheb: ChebConv<C> = cfg.build(&cpu, &mut rng).unwrap();
    let got = cheb
        .forward_with_lambda(&tape, &graph, &xv, &[lambda])
        .unwrap()
        .to_array();
    let le = scatter_reference::cheb_edges(n, &e, lambda);
    let t0 = x.clone();
    let t1 = scatter_reference::propagate(n, &le, &t0);
    let t2 = scatter_reference::propagate(n, &le, &t1) * 2.0 - &t0;
    let w = |k: usize| cheb.lins[k].weight.to_array();
    let want = t0.dot(&w(0)) + t1.dot(&w(1)) + t2.dot(&w(2));
    let err = max_abs_diff(&got, &want);
    assert!(err < 1e-12, "ChebConv on a directed graph: {err:e}");
}
