fn main() {
    let n = 10_000_000u32;
    let t = std::time::Instant::now();
    let mut c = 0u32;
    for i in 0..n { if hdgcn::backend::rng::keep(12345, i, 0.5) { c += 1; } }
    println!("{:.2} ns/elem ({c})", t.elapsed().as_secs_f64() * 1e9 / n as f64);
    let cpu = hdgcn::backend::Cpu::<f32>::new();
    use hdgcn::backend::Backend;
    let t = std::time::Instant::now();
    for s in 0..100 { std::hint::black_box(cpu.dropout_mask(2708, 16, 0.5, s)); }
    println!("mask 2708x16: {:.1} us", t.elapsed().as_secs_f64() * 1e6 / 100.0);
}
