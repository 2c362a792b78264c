//! Test configuration only: the library itself does not read anything set
//! here, and nothing here needs to exist (`cargo package`, docs.rs).
//!
//! Decides once, at build time, whether the tests that need the benchmark
//! data or a wgpu adapter run or are reported by libtest as `ignored`. The
//! rule and its cfgs are documented at the top of `tests/common/mod.rs` and
//! in the README ("Testing"):
//!
//! - `hdgcn_data_tests`: the data root (`$HDGCN_DATA`, relative to the crate
//!   when relative, else `../shared/data`) is a folder, or `CI` is set;
//! - `hdgcn_wgpu_tests`: `HDGCN_WGPU` or `CI` is set;
//! - `HDGCN_TEST_DATA_ROOT` (a compile-time variable): that data root.
//!
//! A variable counts as set unless it is absent, empty, `0` or `false`.

use std::env;
use std::path::PathBuf;

fn is_set(name: &str) -> bool {
    println!("cargo::rerun-if-env-changed={name}");
    env::var(name)
        .is_ok_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"))
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(hdgcn_data_tests, hdgcn_wgpu_tests)");
    println!("cargo::rerun-if-env-changed=HDGCN_DATA");

    let crate_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = match env::var_os("HDGCN_DATA") {
        Some(dir) if !dir.is_empty() => crate_dir.join(dir),
        _ => crate_dir.join("../shared/data"),
    };
    let ci = is_set("CI");
    let have_data = root.is_dir();
    // Watched only while it exists: a missing path would rerun this script,
    // and rebuild the crate, on every build.
    if have_data {
        println!("cargo::rerun-if-changed={}", root.display());
    }
    println!("cargo::rustc-env=HDGCN_TEST_DATA_ROOT={}", root.display());
    if have_data || ci {
        println!("cargo::rustc-cfg=hdgcn_data_tests");
    }
    if is_set("HDGCN_WGPU") || ci {
        println!("cargo::rustc-cfg=hdgcn_wgpu_tests");
    }
}
