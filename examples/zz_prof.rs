use hdgcn::autograd::{Index, SparseMatrix, Tape};
use hdgcn::backend::Cpu;
use hdgcn::conv::DeviceGraph;
use hdgcn::data::Planetoid;
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Features, Module};
use hdgcn::optim::{Adam, AdamConfig, Optimizer};
use rand::SeedableRng;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (name, model_name, iters) = (a[1].as_str(), a[2].as_str(), a[3].parse::<usize>().unwrap());
    let dir = if name == "cora" { "data/planetoid" } else { "../shared/data/planetoid" };
    let data = Planetoid::load(std::path::Path::new(dir), name).unwrap();
    let cpu = Cpu::<f32>::new();
    let dg = DeviceGraph::new(&cpu, Graph::from_edges(data.num_nodes(), &data.edges).unwrap());
    let x = Features::Sparse(SparseMatrix::from_csmat(&cpu, &data.features).unwrap());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let (d, k) = (data.num_features(), data.num_classes);
    let model = if model_name == "gcn" { NodeClassifier::gcn(&cpu, d, 16, k, 0.5, &mut rng).unwrap() } else { NodeClassifier::cheb(&cpu, d, 16, k, 3, 0.5, &mut rng).unwrap() };
    let train = &data.public_split.train;
    let idx = Index::new(&cpu, train).unwrap();
    let y: Vec<usize> = train.iter().map(|&i| data.labels[i].unwrap()).collect();
    let y = Index::new(&cpu, &y).unwrap();
    let params = model.params();
    let mut opt: Adam<Cpu<f32>> = AdamConfig::default().lr(0.01).build().unwrap();
    let t = std::time::Instant::now();
    for s in 0..iters {
        let tape = Tape::with_seed(&cpu, s as u64);
        let logits = model.forward(&tape, &dg, &x).unwrap();
        let loss = logits.cross_entropy_masked(&idx, &y).unwrap();
        let grads = loss.backward().unwrap();
        opt.step(&params, &grads).unwrap();
    }
    println!("{:.3} ms/step", t.elapsed().as_secs_f64() * 1e3 / iters as f64);
}
