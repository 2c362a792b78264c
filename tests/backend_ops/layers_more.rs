//! SageConv, GinConv, Gcn2Conv and Appnp on the backend under test against
//! `Cpu<f64>` (outputs, losses and every parameter gradient, as
//! `layers.rs`): small graphs, one of them a batch, dropout drawn from the
//! same seed on both sides.

use hdgcn::autograd::Tape;
use hdgcn::backend::Backend;
use hdgcn::conv::{Appnp, DeviceGraph, Gcn2ConvConfig, GinConv, GraphConv, SageConvConfig};
use hdgcn::graph::Batch;
use hdgcn::nn::{Activation, Mlp, Module};

use crate::layers::{constant, copy_params, probe, random_graph, rng, to_f64};
use crate::{assert_close, assert_close_tensor, rand_array, reference};

backend_tests!(
    sage_conv_normalized_on_a_batch,
    gin_conv,
    gcn2_conv,
    appnp_with_edge_dropout
);

fn sage_conv_normalized_on_a_batch<B: Backend<Elem = f32>>(b: &B) {
    let batch = Batch::new(&[
        random_graph(9, 0.3, 31),
        random_graph(1, 0.0, 32),
        random_graph(12, 0.25, 33),
    ])
    .unwrap();
    let x = rand_array(22, 6, 34, -1.0, 1.0);
    compare_module!(
        "sage (normalize)",
        b,
        |bk| {
            let mut cfg = SageConvConfig::new(6, 5);
            cfg.normalize = true;
            cfg.build(bk, &mut rng()).unwrap()
        },
        |t, m| {
            let dg = DeviceGraph::from_batch(t.backend(), &batch).unwrap();
            let y = m.forward(t, &dg, &constant(t, &x).into()).unwrap();
            let l = probe(t, &y, 35);
            (y, l)
        }
    );
}

fn gin_conv<B: Backend<Elem = f32>>(b: &B) {
    let g = random_graph(20, 0.2, 36);
    let x = rand_array(20, 5, 37, -1.0, 1.0);
    compare_module!(
        "gin (train_eps, MLP with dropout)",
        b,
        |bk| {
            let mlp = Mlp::new(bk, &[5, 8, 4], Activation::Relu, 0.3, &mut rng()).unwrap();
            GinConv::new(bk, mlp, 0.25, true).unwrap()
        },
        |t, m| {
            let dg = DeviceGraph::new(t.backend(), g.clone());
            let y = m.forward(t, &dg, &constant(t, &x).into()).unwrap();
            let l = probe(t, &y, 38);
            (y, l)
        }
    );
}

fn gcn2_conv<B: Backend<Elem = f32>>(b: &B) {
    let g = random_graph(24, 0.2, 39);
    let x = rand_array(24, 6, 40, -1.0, 1.0);
    let x0 = rand_array(24, 6, 41, -1.0, 1.0);
    for shared in [true, false] {
        compare_module!(
            format!("gcn2 (shared {shared})"),
            b,
            |bk| {
                let mut cfg = Gcn2ConvConfig::new(6, 0.1, 0.5, 4);
                cfg.shared_weights = shared;
                cfg.build(bk, &mut rng()).unwrap()
            },
            |t, m| {
                let dg = DeviceGraph::new(t.backend(), g.clone());
                let y = m
                    .forward_with_initial(t, &dg, &constant(t, &x), &constant(t, &x0))
                    .unwrap();
                let l = probe(t, &y, 42);
                (y, l)
            }
        );
    }
}

/// Appnp has no parameters: the gradient reaching a linear layer before it
/// is compared.
struct LinAppnp<B: Backend> {
    lin: hdgcn::nn::Linear<B>,
    appnp: Appnp,
}

impl<B: Backend> Module<B> for LinAppnp<B> {
    fn visit_params(&self, v: &mut hdgcn::nn::ParamVisitor<'_, B>) {
        v.child("lin", &self.lin);
    }
}

fn appnp_with_edge_dropout<B: Backend<Elem = f32>>(b: &B) {
    let g = random_graph(26, 0.2, 43);
    let x = rand_array(26, 5, 44, -1.0, 1.0);
    compare_module!(
        "linear + appnp (K = 10, edge dropout 0.2)",
        b,
        |bk| LinAppnp {
            lin: hdgcn::nn::Linear::new(bk, 5, 4, true, &mut rng()).unwrap(),
            appnp: Appnp::with_dropout(4, 10, 0.1, 0.2).unwrap(),
        },
        |t, m| {
            let dg = DeviceGraph::new(t.backend(), g.clone());
            let h = m.lin.forward_on(t, &constant(t, &x).into()).unwrap();
            let y = GraphConv::forward(&m.appnp, t, &dg, &h.into()).unwrap();
            let l = probe(t, &y, 45);
            (y, l)
        }
    );
}
