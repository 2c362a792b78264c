//! Asking for an adapter that does not exist is an error, not a panic.
//! (Its own test binary: it sets process environment variables.)
#![cfg(feature = "wgpu")]

use hdgcn::Error;
use hdgcn::backend::{Device, Wgpu, WithBackend};

#[test]
fn a_missing_adapter_is_a_clear_error() {
    // SAFETY: the only test of this binary; no other thread reads the environment.
    unsafe { std::env::set_var("WGPU_ADAPTER_NAME", "no-such-adapter-7f3a") };
    match Wgpu::new() {
        Err(Error::Backend(msg)) => {
            assert!(msg.contains("no-such-adapter-7f3a"), "message: {msg}")
        }
        Err(e) => panic!("expected Error::Backend, got {e}"),
        Ok(b) => panic!("an adapter matched a made-up name: {b:?}"),
    }

    struct Nothing;
    impl WithBackend for Nothing {
        type Output = ();
        fn run<B: hdgcn::backend::Backend<Elem = f32>>(self, _: B) {}
    }
    assert!(matches!(Device::Wgpu.run(Nothing), Err(Error::Backend(_))));
    assert!(Device::Cpu.run(Nothing).is_ok());
    assert!(matches!(
        "tpu".parse::<Device>(),
        Err(Error::InvalidConfig(_))
    ));
}
