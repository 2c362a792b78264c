//! `MessagePassing` through the tape: gather both endpoints, per-edge
//! products, sum / mean / max aggregation and the edge softmax, forward
//! and backward, on each backend against `Cpu<f64>` (same edges: repeated
//! ones, PyG's self-loops, a node without incoming edges).

use hdgcn::autograd::{Tape, Var};
use hdgcn::backend::{Backend, SegmentReduce};
use hdgcn::conv::{MessagePassing, SelfLoops};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::{assert_close, assert_close_tensor, down, r32, rand_array, reference, up};

backend_tests!(aggregations_and_softmax_forward_and_backward);

/// The op chain under test: messages `x_j ⊙ tanh(x_i)`, each aggregation,
/// and the edge softmax of `x_j · w`; a scalar weighing every output.
fn run<B: Backend>(
    tape: &Tape<B>,
    mp: &MessagePassing<B>,
    x: &Var<B>,
    w: &Var<B>,
    probes: &[Var<B>; 4],
) -> (Vec<Var<B>>, Var<B>) {
    let m = mp
        .gather_source(x)
        .unwrap()
        .mul(&mp.gather_target(x).unwrap().tanh())
        .unwrap();
    let mut outs: Vec<Var<B>> = [SegmentReduce::Sum, SegmentReduce::Mean, SegmentReduce::Max]
        .into_iter()
        .map(|op| mp.aggregate(&m, op).unwrap())
        .collect();
    let scores = mp.gather_source(x).unwrap().matmul(w).unwrap().scale(3.0);
    outs.push(mp.softmax(&scores).unwrap());
    let mut loss = tape.constant_array(&Array2::zeros((1, 1)));
    for (o, p) in outs.iter().zip(probes) {
        loss = loss.add(&o.mul(p).unwrap().sum_all()).unwrap();
    }
    (outs, loss)
}

fn aggregations_and_softmax_forward_and_backward<B: Backend<Elem = f32>>(b: &B) {
    let n = 40;
    let mut rng = StdRng::seed_from_u64(21);
    let mut edges: Vec<(usize, usize)> = (0..150)
        .map(|_| (rng.random_range(0..n), rng.random_range(0..n - 1)))
        .collect();
    edges.extend_from_slice(&[(3, 3), (4, 7), (4, 7)]);
    let x = r32(&rand_array(n, 5, 22, -1.0, 1.0));
    let w = r32(&rand_array(5, 3, 23, -1.0, 1.0));
    let r = reference();
    for loops in [SelfLoops::Keep, SelfLoops::Add] {
        let mp = MessagePassing::from_edges(b, n, &edges, loops).unwrap();
        let mp64 = MessagePassing::from_edges(&r, n, &edges, loops).unwrap();
        let e = mp.num_edges();
        let shapes = [(n, 5), (n, 5), (n, 5), (e, 3)];
        let probe_arrays: Vec<Array2<f64>> = shapes
            .iter()
            .enumerate()
            .map(|(k, &(rows, cols))| r32(&rand_array(rows, cols, 30 + k as u64, -1.0, 1.0)))
            .collect();

        let t = Tape::new(b);
        let (xv, wv) = (t.input(up(b, &x)), t.input(up(b, &w)));
        let probes = std::array::from_fn(|k| t.constant(up(b, &probe_arrays[k])));
        let (outs, loss) = run(&t, &mp, &xv, &wv, &probes);
        let g = loss.backward().unwrap();

        let t64 = Tape::new(&r);
        let (xr, wr) = (t64.input(r.upload(x.view())), t64.input(r.upload(w.view())));
        let probes64 = std::array::from_fn(|k| t64.constant(r.upload(probe_arrays[k].view())));
        let (outs64, loss64) = run(&t64, &mp64, &xr, &wr, &probes64);
        let g64 = loss64.backward().unwrap();

        for (k, (o, o64)) in outs.iter().zip(&outs64).enumerate() {
            assert_close(
                &format!("{loops:?} output {k}"),
                &down(b, o.value()),
                &r.download(o64.value()),
            );
        }
        for (what, v, v64) in [("x", &xv, &xr), ("w", &wv, &wr)] {
            let got = down(b, g.wrt(v).unwrap());
            let want = r.download(g64.wrt(v64).unwrap());
            assert_close_tensor(&format!("{loops:?} d/d{what}"), &got, &want, 0.0);
        }
    }
}
