#![no_main]
//! Feeds arbitrary bytes to the pickle parser and every typed decoder.

use hdgcn::data::pickle::{
    Pickle, decode_csr, decode_dense_matrix, decode_int_list_dict, decode_ndarray,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Pickle::parse(data, "fuzz");
    let _ = decode_csr(data, "fuzz");
    let _ = decode_ndarray(data, "fuzz");
    let _ = decode_dense_matrix(data, "fuzz");
    let _ = decode_int_list_dict(data, "fuzz");
});
