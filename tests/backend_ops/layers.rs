//! Layers, losses and optimisers end to end: each case builds the same
//! module on the backend under test and on `Cpu<f64>` (parameters copied
//! from the first to the second), runs forward and backward through the tape
//! with the same dropout seed, and compares the loss, the output and every
//! parameter gradient. Outputs and losses: 1e-4 relative, entry-wise.
//! Gradients: 1e-4 relative to the tensor's largest entry, or to 1e-3 of the
//! module's largest gradient entry if that is larger: the gradient of a
//! nearly dead parameter (an attention bias that a softmax cancels exactly,
//! a query whose attention is still uniform) is a sum of cancelling terms
//! whose `f32` rounding is relative to those terms, not to the tiny result.
//! Optimiser cases compare parameters after several steps.

use hdgcn::Float;
use hdgcn::attention::MvcAttnConfig;
use hdgcn::autograd::{Index, Param, Segments, SparseMatrix, Tape, Var};
use hdgcn::backend::{Backend, Cpu, SegmentReduce};
use hdgcn::conv::{
    ChebConv, DeviceGraph, GatConvConfig, GatV2ConvConfig, GcnConv, GraphConv, HdChebConfig,
};
use hdgcn::graph::{Batch, Graph};
use hdgcn::nn::{Features, LayerNorm, Linear, Module};
use hdgcn::optim::{
    AdaBeliefConfig, AdamConfig, AdamWConfig, ExponentialMovingAverage, Optimizer, SgdConfig,
};
use hdgcn::readout::{AttentionPooling, GatedReadout, MaxReadout, MeanReadout, NodeSet, Readout};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::{assert_close, assert_close_tensor, rand_array, reference};

backend_tests!(
    linear_layer_norm_gelu,
    sparse_input_with_dropout,
    gcn_conv,
    cheb_conv,
    gat_conv,
    gatv2_conv,
    hd_cheb_dynamic_on_a_batch,
    hd_cheb_dynamic_with_score_norm,
    hd_cheb_static,
    readouts,
    losses,
    optimisers_train_identically,
    moving_average_of_the_weights,
);

/// A constant from an `f64` array, in the tape's element type.
pub(crate) fn constant<B: Backend>(t: &Tape<B>, a: &Array2<f64>) -> Var<B> {
    t.constant_array(&a.mapv(B::Elem::from_f64_lossy))
}

pub(crate) fn to_f64<B: Backend>(b: &B, t: &B::Tensor) -> Array2<f64> {
    b.download(t).mapv(|v| v.to_f64_exact())
}

/// Copies every parameter of `from` into the same-named parameter of `to`.
pub(crate) fn copy_params<B: Backend, M: Module<B> + ?Sized, R: Module<Cpu<f64>> + ?Sized>(
    from: &M,
    to: &R,
) {
    let src = from.named_params();
    let dst = to.named_params();
    assert_eq!(src.len(), dst.len(), "parameter count");
    let r = reference();
    for ((name, p), (name64, q)) in src.iter().zip(&dst) {
        assert_eq!(name, name64);
        q.set(r.upload(to_f64(p.backend(), &p.value()).view()))
            .unwrap();
    }
}

/// A scalar that weighs every output entry differently, so that gradients
/// see the whole output.
pub(crate) fn probe<B: Backend>(t: &Tape<B>, y: &Var<B>, seed: u64) -> Var<B> {
    let (r, c) = y.shape();
    let w = constant(t, &rand_array(r, c, seed, -1.0, 1.0));
    y.mul(&w)
        .expect("probe shape")
        .sum_all()
        .add(&y.square().mean_all())
        .expect("scalar")
}

/// Builds a module on both backends, runs `$loss` (an expression of the
/// tape `$t` and module `$m` returning `(output, loss)`) on each, and
/// compares outputs, losses and gradients.
macro_rules! compare_module {
    ($what:expr, $b:expr, |$bk:ident| $build:expr, |$t:ident, $m:ident| $loss:expr) => {{
        let b = $b;
        let r = reference();
        let m32 = {
            let $bk = b;
            $build
        };
        let m64 = {
            let $bk = &r;
            $build
        };
        copy_params(&m32, &m64);
        let t32 = Tape::with_seed(b, 77);
        let (y32, l32) = {
            let ($t, $m) = (&t32, &m32);
            $loss
        };
        let t64 = Tape::with_seed(&r, 77);
        let (y64, l64) = {
            let ($t, $m) = (&t64, &m64);
            $loss
        };
        assert_close(
            &format!("{} output", $what),
            &to_f64(b, &y32.value()),
            &to_f64(&r, &y64.value()),
        );
        assert_close(
            &format!("{} loss", $what),
            &to_f64(b, &l32.value()),
            &to_f64(&r, &l64.value()),
        );
        let g32 = l32.backward().expect("backward");
        let g64 = l64.backward().expect("backward");
        let pairs: Vec<_> = m32
            .named_params()
            .into_iter()
            .zip(m64.named_params())
            .map(|((name, p), (_, q))| {
                let got = g32.get(&p).map(|g| to_f64(b, g));
                let want = g64.get(&q).map(|g| to_f64(&r, g));
                (name, got, want)
            })
            .collect();
        let largest = pairs
            .iter()
            .filter_map(|(_, _, w)| w.as_ref())
            .flat_map(|w| w.iter())
            .fold(0.0f64, |m, v| m.max(v.abs()));
        for (name, got, want) in pairs {
            match (got, want) {
                (Some(got), Some(want)) => assert_close_tensor(
                    &format!("{} d/d{name}", $what),
                    &got,
                    &want,
                    1e-3 * largest,
                ),
                (None, None) => {}
                _ => panic!("{}: gradient of {name} present on one backend only", $what),
            }
        }
    }};
}

pub(crate) fn random_graph(n: usize, p: f64, seed: u64) -> Graph {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut edges = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if rng.random_bool(p) {
                edges.push((i, j));
                edges.push((j, i));
            }
        }
    }
    Graph::from_edges(n, &edges).expect("valid graph")
}

pub(crate) fn rng() -> StdRng {
    StdRng::seed_from_u64(5)
}

struct LinNorm<B: Backend> {
    lin: Linear<B>,
    norm: LayerNorm<B>,
}

impl<B: Backend> Module<B> for LinNorm<B> {
    fn visit_params(&self, v: &mut hdgcn::nn::ParamVisitor<'_, B>) {
        v.child("lin", &self.lin);
        v.child("norm", &self.norm);
    }
}

fn linear_layer_norm_gelu<B: Backend<Elem = f32>>(b: &B) {
    let x = rand_array(23, 9, 1, -1.0, 1.0);
    compare_module!(
        "linear+layer_norm+gelu",
        b,
        |bk| LinNorm {
            lin: Linear::new(bk, 9, 12, true, &mut rng()).unwrap(),
            norm: LayerNorm::new(bk, 12, 1e-5).unwrap(),
        },
        |t, m| {
            let h = m.lin.forward_on(t, &constant(t, &x).into()).unwrap();
            let y = m.norm.forward(&h).unwrap().gelu();
            let l = probe(t, &y, 2);
            (y, l)
        }
    );
}

fn sparse_input_with_dropout<B: Backend<Elem = f32>>(b: &B) {
    let mut rg = StdRng::seed_from_u64(3);
    let dense = Array2::from_shape_fn((40, 30), |_| {
        if rg.random_bool(0.1) {
            rg.random_range(0.0..1.0)
        } else {
            0.0
        }
    });
    let csr = sprs::CsMat::csr_from_dense(dense.view(), 0.0);
    compare_module!(
        "sparse linear",
        b,
        |bk| Linear::new(bk, 30, 8, true, &mut rng()).unwrap(),
        |t, m| {
            let s = SparseMatrix::from_csmat(t.backend(), &csr).unwrap();
            let s = s.dropout(t, 0.4).unwrap();
            let y = m.forward_on(t, &Features::Sparse(s)).unwrap().relu();
            let l = probe(t, &y, 4);
            (y, l)
        }
    );
}

fn gcn_conv<B: Backend<Elem = f32>>(b: &B) {
    let g = random_graph(30, 0.15, 6);
    let x = rand_array(30, 7, 7, -1.0, 1.0);
    compare_module!(
        "gcn",
        b,
        |bk| GcnConv::new(bk, 7, 5, &mut rng()).unwrap(),
        |t, m| {
            let dg = DeviceGraph::new(t.backend(), g.clone());
            let y = m.forward(t, &dg, &constant(t, &x).into()).unwrap();
            let l = probe(t, &y, 8);
            (y, l)
        }
    );
}

fn cheb_conv<B: Backend<Elem = f32>>(b: &B) {
    let g = random_graph(25, 0.2, 9);
    let x = rand_array(25, 6, 10, -1.0, 1.0);
    compare_module!(
        "cheb K=4",
        b,
        |bk| ChebConv::new(bk, 6, 4, 4, &mut rng()).unwrap(),
        |t, m| {
            let dg = DeviceGraph::new(t.backend(), g.clone());
            let y = m.forward(t, &dg, &constant(t, &x).into()).unwrap();
            let l = probe(t, &y, 11);
            (y, l)
        }
    );
}

/// GAT, 3 heads concatenated, attention dropout in training mode (same
/// masks on both backends), on a directed graph with a self-loop.
fn gat_conv<B: Backend<Elem = f32>>(b: &B) {
    let mut g = random_graph(20, 0.15, 12).adjacency().clone();
    g.insert(3, 3, 1.0);
    g.insert(4, 9, 1.0);
    let g = Graph::from_csmat(&g).unwrap();
    let x = rand_array(20, 6, 13, -1.0, 1.0);
    compare_module!(
        "gat",
        b,
        |bk| {
            let mut c = GatConvConfig::new(6, 4);
            (c.heads, c.dropout) = (3, 0.3);
            c.build(bk, &mut rng()).unwrap()
        },
        |t, m| {
            let dg = DeviceGraph::new(t.backend(), g.clone());
            let y = m.forward(t, &dg, &constant(t, &x).into()).unwrap();
            let l = probe(t, &y, 14);
            (y, l)
        }
    );
}

/// GATv2, 2 heads averaged, on a batch of two graphs.
fn gatv2_conv<B: Backend<Elem = f32>>(b: &B) {
    let batch = Batch::new(&[random_graph(9, 0.3, 15), random_graph(12, 0.25, 16)]).unwrap();
    let x = rand_array(21, 5, 17, -1.0, 1.0);
    compare_module!(
        "gatv2",
        b,
        |bk| {
            let mut c = GatV2ConvConfig::new(5, 3);
            (c.heads, c.concat) = (2, false);
            c.build(bk, &mut rng()).unwrap()
        },
        |t, m| {
            let dg = DeviceGraph::from_batch(t.backend(), &batch).unwrap();
            let y = m.forward(t, &dg, &constant(t, &x).into()).unwrap();
            let l = probe(t, &y, 18);
            (y, l)
        }
    );
}

fn hd_cheb_dynamic_on_a_batch<B: Backend<Elem = f32>>(b: &B) {
    hd_cheb_dynamic(b, false);
}

fn hd_cheb_dynamic_with_score_norm<B: Backend<Elem = f32>>(b: &B) {
    hd_cheb_dynamic(b, true);
}

fn hd_cheb_dynamic<B: Backend<Elem = f32>>(b: &B, score_norm: bool) {
    let batch = Batch::new(&[
        random_graph(9, 0.4, 12),
        random_graph(1, 0.0, 13),
        random_graph(14, 0.3, 14),
    ])
    .unwrap();
    let x = rand_array(24, 5, 15, -1.0, 1.0);
    compare_module!(
        if score_norm {
            "hd_cheb dynamic, score_norm"
        } else {
            "hd_cheb dynamic"
        },
        b,
        |bk| {
            let mut cfg = HdChebConfig::new(5, 8, 4);
            cfg.dropout = 0.2;
            let mut attn = MvcAttnConfig::new(8);
            attn.supernodes = 3;
            attn.score_norm = score_norm;
            cfg.build_dynamic(bk, &mut rng(), &attn).unwrap()
        },
        |t, m| {
            let dg = DeviceGraph::from_batch(t.backend(), &batch).unwrap();
            let y = m.forward(t, &dg, &constant(t, &x).into()).unwrap();
            let l = probe(t, &y, 16);
            (y, l)
        }
    );
}

fn hd_cheb_static<B: Backend<Elem = f32>>(b: &B) {
    let g = random_graph(20, 0.2, 17);
    let x = rand_array(20, 6, 18, -1.0, 1.0);
    compare_module!(
        "hd_cheb static",
        b,
        |bk| HdChebConfig::new(6, 8, 6)
            .build_static(bk, &mut rng())
            .unwrap(),
        |t, m| {
            let dg = DeviceGraph::new(t.backend(), g.clone());
            let y = m.forward(t, &dg, &constant(t, &x).into()).unwrap();
            let l = probe(t, &y, 19);
            (y, l)
        }
    );
}

struct Readouts<B: Backend> {
    gated: GatedReadout<B>,
    attn: AttentionPooling<B>,
    max: MaxReadout,
}

impl<B: Backend> Module<B> for Readouts<B> {
    fn visit_params(&self, v: &mut hdgcn::nn::ParamVisitor<'_, B>) {
        v.child("gated", &self.gated);
        v.child("attn", &self.attn);
    }
}

fn readouts<B: Backend<Elem = f32>>(b: &B) {
    let ptr = [0usize, 4, 5, 12];
    let x = rand_array(12, 6, 20, -1.0, 1.0);
    compare_module!(
        "readouts",
        b,
        |bk| Readouts {
            gated: GatedReadout::new(bk, 6, &mut rng()).unwrap(),
            attn: AttentionPooling::linear(bk, 6, Some(5), &mut rng()).unwrap(),
            max: MaxReadout,
        },
        |t, m| {
            let seg = Segments::new(t.backend(), &ptr).unwrap();
            let h = constant(t, &x);
            let a = m.gated.forward(t, &h, &seg).unwrap();
            let c = m.attn.forward(t, &h, &seg).unwrap();
            let d = m.max.forward(t, &h, &seg).unwrap();
            let e = h.segment_reduce(&seg, SegmentReduce::Mean).unwrap();
            // Over a node set (the ABSA aspect mean, and the gated readout).
            let set =
                NodeSet::new(t.backend(), &ptr, &[vec![3, 0], vec![0], vec![6, 1, 2]]).unwrap();
            let f = MeanReadout.forward_nodes(t, &h, &seg, &set).unwrap();
            let g = m.gated.forward_nodes(t, &h, &seg, &set).unwrap();
            let y = Var::concat(&[&a, &c, &d, &e, &f, &g], hdgcn::backend::Axis::Cols).unwrap();
            let l = probe(t, &y, 21);
            (y, l)
        }
    );
}

fn losses<B: Backend<Elem = f32>>(b: &B) {
    let x = rand_array(15, 4, 22, -1.0, 1.0);
    let y01 = rand_array(15, 3, 23, 0.0, 1.0);
    compare_module!(
        "cross-entropy + bce",
        b,
        |bk| Linear::new(bk, 4, 3, true, &mut rng()).unwrap(),
        |t, m| {
            let bk = t.backend();
            let z = m.forward_on(t, &constant(t, &x).into()).unwrap();
            let mask = Index::new(bk, &[0, 2, 3, 7, 11, 14]).unwrap();
            let targets = Index::new(bk, &[2, 0, 1, 1, 2, 0]).unwrap();
            let ce = z.cross_entropy_masked(&mask, &targets).unwrap();
            let yt = bk.upload(y01.mapv(Float::from_f64_lossy).view());
            let bce = z.bce_with_logits(&yt).unwrap();
            let l = ce.add(&bce).unwrap();
            (z, l)
        }
    );
}

/// Eight steps of `opt` on `conv` over `(g, x)`, minimising the probe of
/// `seed`; `after` sees the parameters after each step.
fn eight_steps<B2: Backend>(
    bk: &B2,
    conv: &GcnConv<B2>,
    opt: &mut dyn Optimizer<B2>,
    (g, x, seed): (&Graph, &Array2<f64>, u64),
    mut after: impl FnMut(&[Param<B2>]),
) {
    let dg = DeviceGraph::new(bk, g.clone());
    let params = conv.params();
    for _ in 0..8 {
        let grads = {
            let t = Tape::new(bk);
            let y = conv.forward(&t, &dg, &constant(&t, x).into()).unwrap();
            probe(&t, &y, seed).backward().unwrap()
        };
        opt.step(&params, &grads).unwrap();
        after(&params);
    }
}

/// Eight steps of SGD (momentum), Adam, AdamW and AdaBelief through the
/// [`Optimizer`] trait, on a GCN, identical on both backends.
fn optimisers_train_identically<B: Backend<Elem = f32>>(b: &B) {
    let g = random_graph(18, 0.25, 24);
    let x = rand_array(18, 5, 25, -1.0, 1.0);
    let r = reference();
    let optimisers = ["sgd", "adam", "adamw", "adabelief"];
    for name in optimisers {
        let c32 = GcnConv::new(b, 5, 4, &mut rng()).unwrap();
        let c64 = GcnConv::new(&r, 5, 4, &mut rng()).unwrap();
        copy_params(&c32, &c64);
        macro_rules! build {
            ($B:ty) => {{
                let o: Box<dyn Optimizer<$B>> = match name {
                    "sgd" => Box::new(
                        SgdConfig::default()
                            .lr(0.05)
                            .momentum(0.9)
                            .build::<$B>()
                            .unwrap(),
                    ),
                    "adam" => Box::new(
                        AdamConfig::default()
                            .lr(0.01)
                            .weight_decay(5e-4)
                            .build::<$B>()
                            .unwrap(),
                    ),
                    "adamw" => Box::new(
                        AdamWConfig::default()
                            .lr(0.01)
                            .weight_decay(1e-2)
                            .build::<$B>()
                            .unwrap(),
                    ),
                    _ => Box::new(AdaBeliefConfig::default().lr(1e-2).build::<$B>().unwrap()),
                };
                o
            }};
        }
        let mut o32 = build!(B);
        let mut o64 = build!(Cpu<f64>);
        eight_steps(b, &c32, o32.as_mut(), (&g, &x, 26), |_| {});
        eight_steps(&r, &c64, o64.as_mut(), (&g, &x, 26), |_| {});
        for ((pname, p), (_, q)) in c32.named_params().iter().zip(c64.named_params().iter()) {
            assert_close(
                &format!("{name}: {pname} after 8 steps"),
                &to_f64(b, &p.value()),
                &to_f64(&r, &q.value()),
            );
        }
    }
}

/// Eight Adam steps on a GCN with an [`ExponentialMovingAverage`] (decay
/// 0.7, warm-up) updated after each: the averages, and the weights after
/// a swap there and back, match the `f64` reference.
fn moving_average_of_the_weights<B: Backend<Elem = f32>>(b: &B) {
    let g = random_graph(15, 0.3, 27);
    let x = rand_array(15, 4, 28, -1.0, 1.0);
    let r = reference();
    fn run<B2: Backend>(
        bk: &B2,
        conv: &GcnConv<B2>,
        g: &Graph,
        x: &Array2<f64>,
    ) -> Vec<Array2<f64>> {
        let params = conv.params();
        let mut opt = AdamConfig::default().lr(0.05).build::<B2>().unwrap();
        let mut ema = ExponentialMovingAverage::new(&params, 0.7)
            .unwrap()
            .with_warmup(true);
        eight_steps(bk, conv, &mut opt, (g, x, 29), |p| ema.update(p).unwrap());
        let weights: Vec<_> = params.iter().map(|p| to_f64(bk, &p.value())).collect();
        ema.swap(&params).unwrap();
        let mut out: Vec<_> = params.iter().map(|p| to_f64(bk, &p.value())).collect();
        ema.swap(&params).unwrap();
        for (p, w) in params.iter().zip(&weights) {
            assert_eq!(
                &to_f64(bk, &p.value()),
                w,
                "swapping twice restores the weights"
            );
        }
        out.extend(weights);
        out
    }
    let c32 = GcnConv::new(b, 4, 3, &mut rng()).unwrap();
    let c64 = GcnConv::new(&r, 4, 3, &mut rng()).unwrap();
    copy_params(&c32, &c64);
    let got = run(b, &c32, &g, &x);
    let want = run(&r, &c64, &g, &x);
    let n = c32.params().len();
    for (i, (a, w)) in got.iter().zip(&want).enumerate() {
        let what = if i < n { "average" } else { "weight" };
        assert_close(&format!("{what} {} after 8 steps", i % n), a, w);
    }
    // The averages lag the weights.
    assert_ne!(got[0], got[n]);
}
