//! Writers of the pickles the data tests feed the crate's readers: numpy
//! arrays, scipy CSR matrices and Planetoid's `defaultdict` graphs, byte
//! for byte as Python writes them (protocol 2, or 3 where named).

/// `GLOBAL module name`.
pub fn global(out: &mut Vec<u8>, module: &str, name: &str) {
    out.push(b'c');
    out.extend_from_slice(format!("{module}\n{name}\n").as_bytes());
}

/// `SHORT_BINUNICODE s`.
pub fn short_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'U');
    out.push(s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

/// `BININT v`.
pub fn binint(out: &mut Vec<u8>, v: i32) {
    out.push(b'J');
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `numpy.ndarray` of dtype `code` (`"i4"`, `"f4"`, ...) and byte order
/// `order`, its data as BINSTRING (protocol 2).
pub fn nd_frag(out: &mut Vec<u8>, shape: &[i32], code: &str, order: &str, raw: &[u8]) {
    nd_header(out, shape, code, order);
    out.push(b'T');
    out.extend_from_slice(&(raw.len() as i32).to_le_bytes());
    out.extend_from_slice(raw);
    out.extend_from_slice(b"tb");
}

/// [`nd_frag`] with the data as BINBYTES, as protocol 3 writes it.
pub fn nd_frag_protocol3(out: &mut Vec<u8>, shape: &[i32], code: &str, raw: &[u8]) {
    nd_header(out, shape, code, "<");
    out.push(b'B');
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(raw);
    out.extend_from_slice(b"tb");
}

/// Everything of an ndarray pickle up to its data opcode.
fn nd_header(out: &mut Vec<u8>, shape: &[i32], code: &str, order: &str) {
    global(out, "numpy.core.multiarray", "_reconstruct");
    global(out, "numpy", "ndarray");
    out.extend_from_slice(b"K\x00\x85");
    short_str(out, "b");
    out.extend_from_slice(b"\x87R(K\x01(");
    for &d in shape {
        binint(out, d);
    }
    out.push(b't');
    global(out, "numpy", "dtype");
    short_str(out, code);
    out.extend_from_slice(b"K\x00K\x01\x87R(K\x03");
    short_str(out, order);
    out.extend_from_slice(b"NNN");
    binint(out, -1);
    binint(out, -1);
    out.extend_from_slice(b"K\x00tb\x89");
}

/// A whole protocol-2 pickle of one ndarray.
pub fn ndarray_pickle(shape: &[i32], code: &str, order: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = b"\x80\x02".to_vec();
    nd_frag(&mut out, shape, code, order, raw);
    out.push(b'.');
    out
}

/// Little-endian bytes of `i32`s.
pub fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Little-endian bytes of `f32`s.
pub fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A `scipy.sparse.csr_matrix` declaring `shape`.
pub fn csr_pickle(shape: (i32, i32), indptr: &[i32], indices: &[i32], data: &[f32]) -> Vec<u8> {
    let mut out = b"\x80\x02".to_vec();
    global(&mut out, "scipy.sparse.csr", "csr_matrix");
    out.extend_from_slice(b")\x81}(");
    short_str(&mut out, "format");
    short_str(&mut out, "csr");
    short_str(&mut out, "_shape");
    binint(&mut out, shape.0);
    binint(&mut out, shape.1);
    out.push(0x86);
    short_str(&mut out, "indptr");
    nd_frag(&mut out, &[indptr.len() as i32], "i4", "<", &i32s(indptr));
    short_str(&mut out, "indices");
    nd_frag(&mut out, &[indices.len() as i32], "i4", "<", &i32s(indices));
    short_str(&mut out, "data");
    nd_frag(&mut out, &[data.len() as i32], "f4", "<", &f32s(data));
    out.extend_from_slice(b"ub.");
    out
}

/// Planetoid's `ind.*.graph`: a `defaultdict(list)` of adjacency lists.
pub fn graph_pickle(g: &[(i32, Vec<i32>)]) -> Vec<u8> {
    let mut out = b"\x80\x02".to_vec();
    global(&mut out, "collections", "defaultdict");
    global(&mut out, "__builtin__", "list");
    out.extend_from_slice(b"\x85R(");
    for (k, vs) in g {
        binint(&mut out, *k);
        out.extend_from_slice(b"](");
        for &v in vs {
            binint(&mut out, v);
        }
        out.push(b'e');
    }
    out.extend_from_slice(b"u.");
    out
}

/// A dense `rows x cols` int32 ndarray.
pub fn dense_pickle(rows: usize, cols: usize, values: &[i32]) -> Vec<u8> {
    ndarray_pickle(&[rows as i32, cols as i32], "i4", "<", &i32s(values))
}

/// One-hot label rows (`None`: an all-zero row), as Planetoid's `y` files.
pub fn one_hot(labels: &[Option<usize>], c: usize) -> Vec<u8> {
    let mut v = vec![0i32; labels.len() * c];
    for (i, l) in labels.iter().enumerate() {
        if let Some(l) = l {
            v[i * c + l] = 1;
        }
    }
    dense_pickle(labels.len(), c, &v)
}

/// CSR with row `r` holding the single entry `(r % cols, r + 1)`, declared
/// `declared` columns wide.
pub fn diag_csr(rows: usize, cols: usize, declared: i32) -> Vec<u8> {
    let indptr: Vec<i32> = (0..=rows as i32).collect();
    let indices: Vec<i32> = (0..rows).map(|r| (r % cols) as i32).collect();
    let data: Vec<f32> = (0..rows).map(|r| r as f32 + 1.0).collect();
    csr_pickle((rows as i32, declared), &indptr, &indices, &data)
}
