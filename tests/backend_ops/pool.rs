//! The wgpu buffer pool: uploads are freed rather than pooled, and a loop
//! that repeats the same computation reaches a steady pool after its first
//! pass. Each test opens a device of its own, so that the counts are not
//! disturbed by tests running beside it.

use hdgcn::backend::{Backend, SegmentReduce, Wgpu};

use crate::common::wgpu::open_wgpu;
use crate::{rand_array, up};

/// One pass of a computation that uploads its inputs and, through the
/// chunked reductions of a segment longer than one workgroup's chunk,
/// uploads chunk offsets of its own: softmax and sum over one segment of
/// 5,000 rows, read back.
fn one_pass(b: &Wgpu, seed: u64) -> f32 {
    let x = up(b, &rand_array(5000, 8, seed, -1.0, 1.0));
    let ptr = b.index_from_slice(&[0, 5000]);
    let y = b.segment_softmax(&x, &ptr);
    let (s, _) = b.segment_reduce(&y, &ptr, SegmentReduce::Sum);
    b.download(&s).sum()
}

#[test]
#[cfg_attr(
    not(hdgcn_wgpu_tests),
    ignore = "needs a wgpu adapter: set HDGCN_WGPU=1 (see tests/common/mod.rs)"
)]
fn uploads_are_freed_not_pooled() {
    let b = open_wgpu();
    for seed in 0..50 {
        let t = up(&b, &rand_array(16, 16, seed, -1.0, 1.0));
        let i = b.index_from_slice(&[0, 1, 2, 3]);
        assert_eq!(b.download(&t).dim(), (16, 16));
        drop((t, i));
    }
    assert_eq!(b.pooled_buffers(), 0, "uploaded buffers went to the pool");
    assert_eq!(b.pooled_bytes(), 0);
}

#[test]
#[cfg_attr(
    not(hdgcn_wgpu_tests),
    ignore = "needs a wgpu adapter: set HDGCN_WGPU=1 (see tests/common/mod.rs)"
)]
fn a_dropped_result_is_pooled_and_taken_again() {
    let b = open_wgpu();
    let x = up(&b, &rand_array(64, 64, 7, -1.0, 1.0));
    drop(b.matmul(&x, &x, false, false));
    assert_eq!((b.pooled_buffers(), b.pooled_bytes()), (1, 64 * 64 * 4));
    // The next result of that size takes the pooled buffer.
    let y = b.matmul(&x, &x, false, true);
    assert_eq!((b.pooled_buffers(), b.pooled_bytes()), (0, 0));
    drop(y);
    assert_eq!(b.pooled_buffers(), 1);
    b.release_pooled_buffers();
    assert_eq!((b.pooled_buffers(), b.pooled_bytes()), (0, 0));
}

#[test]
#[cfg_attr(
    not(hdgcn_wgpu_tests),
    ignore = "needs a wgpu adapter: set HDGCN_WGPU=1 (see tests/common/mod.rs)"
)]
fn a_repeated_pass_reaches_a_steady_pool() {
    let b = open_wgpu();
    // Each column of the softmax sums to 1 over the segment.
    assert!((one_pass(&b, 0) - 8.0).abs() < 1e-3);
    let (buffers, bytes) = (b.pooled_buffers(), b.pooled_bytes());
    assert!(
        buffers > 0,
        "the pass's intermediate tensors should be pooled"
    );
    for seed in 1..20 {
        assert!((one_pass(&b, seed) - 8.0).abs() < 1e-3);
        assert_eq!(
            (b.pooled_buffers(), b.pooled_bytes()),
            (buffers, bytes),
            "the pool changed on pass {seed}"
        );
    }
    b.release_pooled_buffers();
    assert_eq!((b.pooled_buffers(), b.pooled_bytes()), (0, 0));
    // The device still works after its pool was emptied.
    assert!((one_pass(&b, 99) - 8.0).abs() < 1e-3);
}
