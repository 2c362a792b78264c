//! The memory a backward pass holds, counted by this test binary's
//! allocator: a value is released once the last gradient that reads it has
//! been computed (not when the pass reaches the op that made it), and a
//! ReLU keeps a one-bit mask, not its output. So in `relu(x W1) W2` the
//! hidden layer is gone before its gradient, of the same size, is made.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use hdgcn::autograd::{Param, Tape};
use hdgcn::backend::{Backend, Cpu};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Blocks of at least this many bytes are counted.
const LARGE: usize = 64 << 10;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting the bytes of large blocks live now and
/// the most live since the last [`reset_peak`].
struct Counting;

fn grow(size: usize) {
    if size >= LARGE {
        let now = LIVE.fetch_add(size, Ordering::SeqCst) + size;
        PEAK.fetch_max(now, Ordering::SeqCst);
    }
}

fn shrink(size: usize) {
    if size >= LARGE {
        LIVE.fetch_sub(size, Ordering::SeqCst);
    }
}

// SAFETY: every call is forwarded to `System` unchanged; only counters are
// updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrink(layout.size());
            grow(new_size);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn reset_peak() -> usize {
    let now = LIVE.load(Ordering::SeqCst);
    PEAK.store(now, Ordering::SeqCst);
    now
}

fn random(rng: &mut StdRng, r: usize, c: usize) -> Array2<f64> {
    Array2::from_shape_fn((r, c), |_| rng.random_range(-1.0..1.0))
}

#[test]
fn the_hidden_layer_is_released_before_its_gradient_is_made() {
    let (n, d) = (4096, 16);
    let block = n * d * 8; // one n x d f64 tensor: 512 KiB
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(9);
    let w1 = Param::from_array(&cpu, &random(&mut rng, d, d));
    let w2 = Param::from_array(&cpu, &random(&mut rng, d, 1));
    let tape = Tape::new(&cpu);
    let x = tape.constant(cpu.upload_owned(random(&mut rng, n, d)));
    let h = x.matmul(&tape.param(&w1)).unwrap().relu();
    // The output is n x 1 (32 KiB): below the counted size.
    let loss = h.matmul(&tape.param(&w2)).unwrap().sum_all();
    drop(h);
    // Live now: the features and the hidden layer (kept for W2's gradient).
    let base = reset_peak();
    let grads = loss.backward().unwrap();
    let peak = PEAK.load(Ordering::SeqCst) - base;
    // W2's gradient reads the hidden layer last: it is released before the
    // hidden layer's gradient (n x d) is made, and the ReLU's backward
    // reads its mask, so the pass never holds a third n x d tensor.
    assert!(
        peak < block / 2,
        "the backward pass held {peak} bytes of large blocks above its start \
         ({block} is one hidden layer)"
    );
    // And the gradients are there, of their shapes.
    assert_eq!(cpu.shape(grads.get(&w1).unwrap()), (d, d));
    assert_eq!(cpu.shape(grads.get(&w2).unwrap()), (d, 1));
    // After the pass, the hidden layer is gone: only the features remain.
    drop(grads);
    let live = LIVE.load(Ordering::SeqCst);
    assert!(
        live + block / 2 < base,
        "{live} bytes live after the pass, {base} before it"
    );
}
