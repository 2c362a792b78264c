//! The wgpu device of the adapter tests. Those tests run only when they are
//! meant to (`hdgcn_wgpu_tests`, see `mod.rs`), so no adapter is a failure.

use std::sync::OnceLock;

use hdgcn::backend::Wgpu;

/// A wgpu device of the caller's own (with its own buffer pool). Panics
/// with the adapter error when there is none.
pub fn open_wgpu() -> Wgpu {
    Wgpu::new().unwrap_or_else(|e| {
        panic!("the wgpu tests are enabled (HDGCN_WGPU or CI) but no adapter opened: {e}")
    })
}

/// The device shared by the tests of one binary (opened on first use).
pub fn shared_wgpu() -> Wgpu {
    static DEVICE: OnceLock<Wgpu> = OnceLock::new();
    DEVICE.get_or_init(open_wgpu).clone()
}
