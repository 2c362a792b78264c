//! A minimal, safe reader for Python pickles (protocols 0–3; protocol 3
//! only adds the `bytes` opcodes, which numpy arrays saved from Python 3 use).
//!
//! Only the opcodes that numpy / scipy / `collections` pickles use are
//! supported. Nothing is ever executed: `GLOBAL`, `REDUCE`, `NEWOBJ` and
//! `BUILD` merely record what Python *would* have called, and the typed
//! decoders ([`decode_csr`], [`decode_ndarray`], [`decode_int_list_dict`])
//! recognise the few shapes they need.
//!
//! The decoded value graph lives in an arena ([`Pickle`]), addressed by
//! [`ValueId`]; memo references (`BINGET`) share a node instead of copying it,
//! so the memory used is bounded by a small multiple of the input size and
//! self-referencing pickles cannot blow up. Every length field is checked
//! against the number of bytes that remain before anything is allocated.

use crate::{Error, Result};
use std::collections::HashMap;

/// Index of a value inside a [`Pickle`] arena.
pub type ValueId = usize;

/// How a Python object was constructed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `REDUCE`: `callable(*args)`.
    Reduce,
    /// `NEWOBJ`: `cls.__new__(cls, *args)`.
    NewObj,
}

/// One node of the decoded value graph.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer that fits in `i64`.
    Int(i64),
    /// An integer too large for `i64` (little-endian two's complement bytes).
    BigInt(Vec<u8>),
    /// A float.
    Float(f64),
    /// A Python 2 `str` / Python 3 `bytes`.
    Bytes(Vec<u8>),
    /// A unicode string.
    Str(String),
    /// A tuple.
    Tuple(Vec<ValueId>),
    /// A list.
    List(Vec<ValueId>),
    /// A dict, as key/value pairs in insertion order.
    Dict(Vec<(ValueId, ValueId)>),
    /// A global reference `module.name` (never resolved).
    Global {
        /// Module, e.g. `numpy.core.multiarray`.
        module: String,
        /// Attribute name, e.g. `_reconstruct`.
        name: String,
    },
    /// An object built by `REDUCE` or `NEWOBJ`.
    Object {
        /// How it was built.
        kind: CallKind,
        /// The callable (or class) value.
        callable: ValueId,
        /// The argument tuple.
        args: ValueId,
        /// State set by `BUILD`, if any.
        state: Option<ValueId>,
        /// Items added with `SETITEM(S)` (dict subclasses such as `defaultdict`).
        items: Vec<(ValueId, ValueId)>,
        /// Items added with `APPEND(S)` (list subclasses).
        elements: Vec<ValueId>,
    },
}

/// A decoded pickle: an arena of values plus the root.
#[derive(Debug, Clone)]
pub struct Pickle {
    values: Vec<Value>,
    root: ValueId,
}

/// Maximum number of values on the stack plus pending marks; far above what
/// real files need (the stack never holds more than a few dozen entries).
const MAX_MARKS: usize = 1 << 16;

impl Pickle {
    /// Parses `bytes` as a pickle; `path` is only used in error messages.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Pickle> {
        Parser {
            input: bytes,
            pos: 0,
            path,
            values: Vec::new(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
        }
        .run()
    }

    /// The top-level value (what `pickle.load` returns).
    pub fn root(&self) -> ValueId {
        self.root
    }

    /// The value stored at `id`.
    ///
    /// Ids obtained from this pickle are always valid; an unknown id yields
    /// [`Value::None`] rather than panicking.
    pub fn get(&self, id: ValueId) -> &Value {
        self.values.get(id).unwrap_or(&Value::None)
    }

    /// Number of values in the arena.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the arena is empty (never true for a successfully parsed pickle).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
    path: &'a str,
    values: Vec<Value>,
    stack: Vec<ValueId>,
    marks: Vec<usize>,
    memo: HashMap<u32, ValueId>,
}

impl<'a> Parser<'a> {
    fn err(&self, reason: impl Into<String>) -> Error {
        Error::format(
            self.path,
            format!("pickle offset {}: {}", self.pos, reason.into()),
        )
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let remaining = self.input.len() - self.pos;
        if n > remaining {
            return Err(self.err(format!("truncated: need {n} bytes, {remaining} remain")));
        }
        let s = &self.input[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i32(&mut self) -> Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn line(&mut self) -> Result<&'a [u8]> {
        let rest = &self.input[self.pos..];
        match rest.iter().position(|&c| c == b'\n') {
            Some(i) => {
                self.pos += i + 1;
                Ok(&rest[..i])
            }
            None => Err(self.err("truncated: unterminated text line")),
        }
    }

    fn text_line(&mut self) -> Result<String> {
        let l = self.line()?;
        String::from_utf8(l.to_vec()).map_err(|_| self.err("non-UTF-8 text line"))
    }

    fn push_value(&mut self, v: Value) -> ValueId {
        let id = self.values.len();
        self.values.push(v);
        self.stack.push(id);
        id
    }

    fn pop(&mut self) -> Result<ValueId> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow"));
        }
        self.stack.pop().ok_or_else(|| self.err("stack underflow"))
    }

    fn top(&self) -> Result<ValueId> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow"));
        }
        self.stack
            .last()
            .copied()
            .ok_or_else(|| self.err("stack underflow"))
    }

    fn pop_mark(&mut self) -> Result<Vec<ValueId>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.err("no MARK on stack"))?;
        if m > self.stack.len() {
            return Err(self.err("corrupt MARK"));
        }
        Ok(self.stack.split_off(m))
    }

    fn memo_put(&mut self, idx: u32) -> Result<()> {
        let top = self.top()?;
        self.memo.insert(idx, top);
        Ok(())
    }

    fn memo_get(&mut self, idx: u32) -> Result<()> {
        let id = *self
            .memo
            .get(&idx)
            .ok_or_else(|| self.err(format!("memo key {idx} not defined")))?;
        self.stack.push(id);
        Ok(())
    }

    fn tuple_n(&mut self, n: usize) -> Result<()> {
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.pop()?);
        }
        items.reverse();
        self.push_value(Value::Tuple(items));
        Ok(())
    }

    fn append(&mut self, target: ValueId, items: Vec<ValueId>) -> Result<()> {
        match self.values.get_mut(target) {
            Some(Value::List(l)) => l.extend(items),
            Some(Value::Object { elements, .. }) => elements.extend(items),
            _ => return Err(self.err("APPEND to a value that is not a list")),
        }
        Ok(())
    }

    fn set_items(&mut self, target: ValueId, flat: Vec<ValueId>) -> Result<()> {
        if flat.len() % 2 != 0 {
            return Err(self.err("SETITEMS with an odd number of items"));
        }
        let pairs = flat.chunks_exact(2).map(|c| (c[0], c[1]));
        match self.values.get_mut(target) {
            Some(Value::Dict(d)) => d.extend(pairs),
            Some(Value::Object { items, .. }) => items.extend(pairs),
            _ => return Err(self.err("SETITEM on a value that is not a dict")),
        }
        Ok(())
    }

    fn string_body(&mut self, n: usize, unicode: bool) -> Result<()> {
        let b = self.take(n)?;
        let v = if unicode {
            Value::Str(
                String::from_utf8(b.to_vec()).map_err(|_| self.err("invalid UTF-8 in unicode"))?,
            )
        } else {
            Value::Bytes(b.to_vec())
        };
        self.push_value(v);
        Ok(())
    }

    fn long_from_bytes(b: &[u8]) -> Value {
        if b.is_empty() {
            return Value::Int(0);
        }
        if b.len() <= 8 {
            let neg = b[b.len() - 1] & 0x80 != 0;
            let mut buf = if neg { [0xffu8; 8] } else { [0u8; 8] };
            buf[..b.len()].copy_from_slice(b);
            return Value::Int(i64::from_le_bytes(buf));
        }
        // Longer encodings may still fit if the high bytes are pure sign extension.
        let neg = b[b.len() - 1] & 0x80 != 0;
        let ext = if neg { 0xff } else { 0 };
        if b[8..].iter().all(|&c| c == ext) && ((b[7] & 0x80 != 0) == neg) {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(&b[..8]);
            return Value::Int(i64::from_le_bytes(buf));
        }
        Value::BigInt(b.to_vec())
    }

    fn run(mut self) -> Result<Pickle> {
        loop {
            let op = self.u8()?;
            match op {
                0x80 => {
                    // PROTO
                    let p = self.u8()?;
                    if p > 3 {
                        return Err(self.err(format!("unsupported pickle protocol {p}")));
                    }
                }
                b'.' => {
                    // STOP
                    let root = self.pop()?;
                    return Ok(Pickle {
                        values: self.values,
                        root,
                    });
                }
                b'(' => {
                    if self.marks.len() >= MAX_MARKS {
                        return Err(self.err("too many nested MARKs"));
                    }
                    self.marks.push(self.stack.len());
                }
                b'N' => {
                    self.push_value(Value::None);
                }
                0x88 => {
                    self.push_value(Value::Bool(true));
                }
                0x89 => {
                    self.push_value(Value::Bool(false));
                }
                b'J' => {
                    let v = self.i32()?;
                    self.push_value(Value::Int(v.into()));
                }
                b'K' => {
                    let v = self.u8()?;
                    self.push_value(Value::Int(v.into()));
                }
                b'M' => {
                    let v = self.u16()?;
                    self.push_value(Value::Int(v.into()));
                }
                0x8a => {
                    // LONG1
                    let n = self.u8()? as usize;
                    let b = self.take(n)?;
                    self.push_value(Self::long_from_bytes(b));
                }
                0x8b => {
                    // LONG4
                    let n = self.i32()?;
                    let n = usize::try_from(n).map_err(|_| self.err("negative LONG4 length"))?;
                    let b = self.take(n)?;
                    self.push_value(Self::long_from_bytes(b));
                }
                b'I' => {
                    // INT (text); "00"/"01" are False/True in protocol 0.
                    let s = self.text_line()?;
                    let v = match s.trim() {
                        "00" => Value::Bool(false),
                        "01" => Value::Bool(true),
                        t => Value::Int(
                            t.parse::<i64>()
                                .map_err(|_| self.err(format!("bad INT {t:?}")))?,
                        ),
                    };
                    self.push_value(v);
                }
                b'L' => {
                    // LONG (text)
                    let s = self.text_line()?;
                    let t = s.trim().trim_end_matches('L');
                    let v = t
                        .parse::<i64>()
                        .map_err(|_| self.err(format!("bad LONG {t:?}")))?;
                    self.push_value(Value::Int(v));
                }
                b'F' => {
                    let s = self.text_line()?;
                    let v = s.trim().parse::<f64>().map_err(|_| self.err("bad FLOAT"))?;
                    self.push_value(Value::Float(v));
                }
                b'G' => {
                    // BINFLOAT, big-endian
                    let b = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    self.push_value(Value::Float(f64::from_be_bytes(a)));
                }
                b'U' | b'C' => {
                    // SHORT_BINSTRING / SHORT_BINBYTES
                    let n = self.u8()? as usize;
                    self.string_body(n, false)?;
                }
                b'T' => {
                    // BINSTRING: signed 4-byte length
                    let n = self.i32()?;
                    let n =
                        usize::try_from(n).map_err(|_| self.err("negative BINSTRING length"))?;
                    self.string_body(n, false)?;
                }
                b'B' => {
                    // BINBYTES
                    let n = self.u32()? as usize;
                    self.string_body(n, false)?;
                }
                b'X' => {
                    // BINUNICODE
                    let n = self.u32()? as usize;
                    self.string_body(n, true)?;
                }
                b'c' => {
                    let module = self.text_line()?;
                    let name = self.text_line()?;
                    self.push_value(Value::Global { module, name });
                }
                b')' => {
                    self.push_value(Value::Tuple(Vec::new()));
                }
                b']' => {
                    self.push_value(Value::List(Vec::new()));
                }
                b'}' => {
                    self.push_value(Value::Dict(Vec::new()));
                }
                b't' => {
                    let items = self.pop_mark()?;
                    self.push_value(Value::Tuple(items));
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push_value(Value::List(items));
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(self.err("DICT with an odd number of items"));
                    }
                    let pairs = items.chunks_exact(2).map(|c| (c[0], c[1])).collect();
                    self.push_value(Value::Dict(pairs));
                }
                0x85 => self.tuple_n(1)?,
                0x86 => self.tuple_n(2)?,
                0x87 => self.tuple_n(3)?,
                b'a' => {
                    let v = self.pop()?;
                    let target = self.top()?;
                    self.append(target, vec![v])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    let target = self.top()?;
                    self.append(target, items)?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let target = self.top()?;
                    self.set_items(target, vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    let target = self.top()?;
                    self.set_items(target, items)?;
                }
                b'q' => {
                    let i = self.u8()?;
                    self.memo_put(i.into())?;
                }
                b'r' => {
                    let i = self.u32()?;
                    self.memo_put(i)?;
                }
                b'p' => {
                    let s = self.text_line()?;
                    let i = s
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| self.err("bad PUT index"))?;
                    self.memo_put(i)?;
                }
                b'h' => {
                    let i = self.u8()?;
                    self.memo_get(i.into())?;
                }
                b'j' => {
                    let i = self.u32()?;
                    self.memo_get(i)?;
                }
                b'g' => {
                    let s = self.text_line()?;
                    let i = s
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| self.err("bad GET index"))?;
                    self.memo_get(i)?;
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let t = self.top()?;
                    self.stack.push(t);
                }
                b'R' | 0x81 => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    if !matches!(self.values.get(args), Some(Value::Tuple(_))) {
                        return Err(self.err("REDUCE/NEWOBJ arguments are not a tuple"));
                    }
                    let kind = if op == b'R' {
                        CallKind::Reduce
                    } else {
                        CallKind::NewObj
                    };
                    self.push_value(Value::Object {
                        kind,
                        callable,
                        args,
                        state: None,
                        items: Vec::new(),
                        elements: Vec::new(),
                    });
                }
                b'b' => {
                    let st = self.pop()?;
                    let target = self.top()?;
                    match self.values.get_mut(target) {
                        Some(Value::Object { state, .. }) => *state = Some(st),
                        _ => return Err(self.err("BUILD on a value that is not an object")),
                    }
                }
                other => {
                    self.pos -= 1;
                    return Err(self.err(format!("unsupported opcode 0x{other:02x}")));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Typed decoders
// ---------------------------------------------------------------------------

/// Element type of a decoded numpy array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl DType {
    fn size(self) -> usize {
        match self {
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }
}

/// Element storage of a decoded numpy array (widened, C order).
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayData {
    /// Integer elements.
    Int(Vec<i64>),
    /// Floating-point elements.
    Float(Vec<f64>),
}

impl ArrayData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            ArrayData::Int(v) => v.len(),
            ArrayData::Float(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A dense numpy array decoded from a pickle, in row-major (C) order.
#[derive(Debug, Clone, PartialEq)]
pub struct NdArray {
    /// Shape.
    pub shape: Vec<usize>,
    /// Original element type.
    pub dtype: DType,
    /// Elements in C order.
    pub data: ArrayData,
}

/// Dense numeric matrix (e.g. one-hot labels), row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseMatrix {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// `rows * cols` values in row-major order.
    pub data: Vec<f64>,
}

struct Ctx<'p> {
    p: &'p Pickle,
    path: &'p str,
}

impl<'p> Ctx<'p> {
    fn err(&self, reason: impl Into<String>) -> Error {
        Error::format(self.path, reason.into())
    }

    fn get(&self, id: ValueId) -> &'p Value {
        self.p.get(id)
    }

    fn tuple(&self, id: ValueId, what: &str) -> Result<&'p [ValueId]> {
        match self.get(id) {
            Value::Tuple(t) => Ok(t),
            _ => Err(self.err(format!("{what}: expected a tuple"))),
        }
    }

    fn int(&self, id: ValueId, what: &str) -> Result<i64> {
        match self.get(id) {
            Value::Int(i) => Ok(*i),
            Value::Bool(b) => Ok(i64::from(*b)),
            _ => Err(self.err(format!("{what}: expected an integer"))),
        }
    }

    fn usize(&self, id: ValueId, what: &str) -> Result<usize> {
        let i = self.int(id, what)?;
        usize::try_from(i).map_err(|_| self.err(format!("{what}: negative value {i}")))
    }

    fn bytes_or_str(&self, id: ValueId, what: &str) -> Result<&'p [u8]> {
        match self.get(id) {
            Value::Bytes(b) => Ok(b),
            Value::Str(s) => Ok(s.as_bytes()),
            _ => Err(self.err(format!("{what}: expected a string"))),
        }
    }

    fn global(&self, id: ValueId) -> Option<(&'p str, &'p str)> {
        match self.get(id) {
            Value::Global { module, name } => Some((module, name)),
            _ => None,
        }
    }

    /// The `(key, value)` items of a dict or a `collections.defaultdict`.
    fn dict_items(&self, id: ValueId) -> Result<&'p [(ValueId, ValueId)]> {
        match self.get(id) {
            Value::Dict(d) => Ok(d),
            Value::Object {
                kind: CallKind::Reduce,
                callable,
                items,
                ..
            } if self.is_global(*callable, &["collections"], "defaultdict") => Ok(items),
            _ => Err(self.err("expected a dict or collections.defaultdict")),
        }
    }

    fn is_global(&self, id: ValueId, modules: &[&str], name: &str) -> bool {
        matches!(self.global(id), Some((m, n)) if n == name && modules.contains(&m))
    }

    fn dict_get(&self, pairs: &[(ValueId, ValueId)], key: &str) -> Option<ValueId> {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| {
                matches!(self.get(*k), Value::Bytes(b) if b == key.as_bytes())
                    || matches!(self.get(*k), Value::Str(s) if s == key)
            })
            .map(|&(_, v)| v)
    }

    fn dtype(&self, id: ValueId) -> Result<(DType, bool)> {
        // REDUCE(numpy.dtype, ('i4', 0, 1)) + BUILD((3, '<', ...))
        let Value::Object {
            callable,
            args,
            state,
            ..
        } = self.get(id)
        else {
            return Err(self.err("dtype: expected a numpy.dtype object"));
        };
        if !self.is_global(*callable, &["numpy"], "dtype") {
            return Err(self.err("dtype: callable is not numpy.dtype"));
        }
        let args = self.tuple(*args, "dtype args")?;
        let first = args
            .first()
            .ok_or_else(|| self.err("dtype: empty argument tuple"))?;
        let code = self.bytes_or_str(*first, "dtype code")?;
        let (mut order, code) = match code.first() {
            Some(&c @ (b'<' | b'>' | b'=' | b'|')) => (c, &code[1..]),
            _ => (b'=', code),
        };
        let dt = match code {
            b"i4" => DType::I32,
            b"i8" => DType::I64,
            b"f4" => DType::F32,
            b"f8" => DType::F64,
            other => {
                return Err(self.err(format!(
                    "unsupported dtype {:?}",
                    String::from_utf8_lossy(other)
                )));
            }
        };
        if let Some(st) = state {
            let st = self.tuple(*st, "dtype state")?;
            if let Some(&o) = st.get(1) {
                let o = self.bytes_or_str(o, "dtype byte order")?;
                match o {
                    [c @ (b'<' | b'>' | b'=' | b'|')] => order = *c,
                    _ => return Err(self.err("dtype: invalid byte order")),
                }
            }
        }
        let big = match order {
            b'>' => true,
            b'<' => false,
            b'|' => return Err(self.err("dtype: byte order '|' invalid for multi-byte type")),
            _ => cfg!(target_endian = "big"),
        };
        Ok((dt, big))
    }
}

fn convert_raw(raw: &[u8], dt: DType, big: bool) -> ArrayData {
    match dt {
        DType::I32 => ArrayData::Int(
            raw.chunks_exact(4)
                .map(|c| {
                    let a = [c[0], c[1], c[2], c[3]];
                    i64::from(if big {
                        i32::from_be_bytes(a)
                    } else {
                        i32::from_le_bytes(a)
                    })
                })
                .collect(),
        ),
        DType::I64 => ArrayData::Int(
            raw.chunks_exact(8)
                .map(|c| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    if big {
                        i64::from_be_bytes(a)
                    } else {
                        i64::from_le_bytes(a)
                    }
                })
                .collect(),
        ),
        DType::F32 => ArrayData::Float(
            raw.chunks_exact(4)
                .map(|c| {
                    let a = [c[0], c[1], c[2], c[3]];
                    f64::from(if big {
                        f32::from_be_bytes(a)
                    } else {
                        f32::from_le_bytes(a)
                    })
                })
                .collect(),
        ),
        DType::F64 => ArrayData::Float(
            raw.chunks_exact(8)
                .map(|c| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    if big {
                        f64::from_be_bytes(a)
                    } else {
                        f64::from_le_bytes(a)
                    }
                })
                .collect(),
        ),
    }
}

fn ndarray_at(cx: &Ctx<'_>, id: ValueId) -> Result<NdArray> {
    // REDUCE(numpy.core.multiarray._reconstruct, (numpy.ndarray, (0,), 'b'))
    //   + BUILD((version, shape, dtype, is_fortran, raw))
    let Value::Object {
        kind: CallKind::Reduce,
        callable,
        state,
        ..
    } = cx.get(id)
    else {
        return Err(cx.err("expected a numpy ndarray (REDUCE of _reconstruct)"));
    };
    if !cx.is_global(
        *callable,
        &["numpy.core.multiarray", "numpy._core.multiarray"],
        "_reconstruct",
    ) {
        return Err(cx.err("ndarray: callable is not numpy.core.multiarray._reconstruct"));
    }
    let st = state.ok_or_else(|| cx.err("ndarray: missing BUILD state"))?;
    let st = cx.tuple(st, "ndarray state")?;
    let (shape_id, dtype_id, fortran_id, raw_id) = match st {
        [_, s, d, f, r] => (*s, *d, *f, *r),
        [s, d, f, r] => (*s, *d, *f, *r),
        _ => return Err(cx.err("ndarray state: expected 4 or 5 fields")),
    };
    let shape_ids = cx.tuple(shape_id, "ndarray shape")?;
    let shape = shape_ids
        .iter()
        .map(|&s| cx.usize(s, "ndarray shape"))
        .collect::<Result<Vec<_>>>()?;
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| cx.err("ndarray: shape overflows"))?;
    let (dt, big) = cx.dtype(dtype_id)?;
    let fortran = match cx.get(fortran_id) {
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        _ => return Err(cx.err("ndarray: is_fortran is not a bool")),
    };
    let raw = match cx.get(raw_id) {
        Value::Bytes(b) => b.as_slice(),
        Value::List(_) => return Err(cx.err("ndarray: object arrays are not supported")),
        _ => return Err(cx.err("ndarray: raw data is not a byte string")),
    };
    let expected = count
        .checked_mul(dt.size())
        .ok_or_else(|| cx.err("ndarray: byte size overflows"))?;
    if raw.len() != expected {
        return Err(cx.err(format!(
            "ndarray: shape {shape:?} of {dt:?} needs {expected} bytes, got {}",
            raw.len()
        )));
    }
    let mut data = convert_raw(raw, dt, big);
    if fortran && shape.len() > 1 {
        if shape.len() != 2 {
            return Err(cx.err("ndarray: Fortran order only supported for 2-D arrays"));
        }
        let (r, c) = (shape[0], shape[1]);
        fn transpose<T: Copy>(v: &[T], r: usize, c: usize) -> Vec<T> {
            // v is column-major r x c; produce row-major.
            let mut out = Vec::with_capacity(v.len());
            for i in 0..r {
                for j in 0..c {
                    out.push(v[j * r + i]);
                }
            }
            out
        }
        data = match data {
            ArrayData::Int(v) => ArrayData::Int(transpose(&v, r, c)),
            ArrayData::Float(v) => ArrayData::Float(transpose(&v, r, c)),
        };
    }
    Ok(NdArray {
        shape,
        dtype: dt,
        data,
    })
}

/// Decodes a pickled dense `numpy.ndarray` (int32/int64/float32/float64).
pub fn decode_ndarray(bytes: &[u8], path: &str) -> Result<NdArray> {
    let p = Pickle::parse(bytes, path)?;
    ndarray_at(&Ctx { p: &p, path }, p.root())
}

/// Decodes a pickled 2-D numeric array (e.g. one-hot labels) as `f64`s.
pub fn decode_dense_matrix(bytes: &[u8], path: &str) -> Result<DenseMatrix> {
    let a = decode_ndarray(bytes, path)?;
    let [rows, cols] = a.shape[..] else {
        return Err(Error::format(
            path,
            format!("expected a 2-D array, got shape {:?}", a.shape),
        ));
    };
    let data = match a.data {
        ArrayData::Float(v) => v,
        // Values come from i32/i64 labels; the cast is exact for one-hot data.
        ArrayData::Int(v) => v.into_iter().map(|x| x as f64).collect(),
    };
    Ok(DenseMatrix { rows, cols, data })
}

/// Decodes a pickled `scipy.sparse.csr_matrix` into a validated `sprs` CSR
/// matrix of `f32`.
///
/// Checks that `indptr` has `rows + 1` entries, starts at 0, is monotone and
/// ends at `nnz`, that `indices` and `data` have `nnz` entries, and that every
/// column index is below `cols`. Unsorted column indices are sorted and
/// duplicates summed (scipy's canonical form).
pub fn decode_csr(bytes: &[u8], path: &str) -> Result<sprs::CsMat<f32>> {
    let p = Pickle::parse(bytes, path)?;
    let cx = Ctx { p: &p, path };
    let root = p.root();
    let Value::Object {
        kind,
        callable,
        args,
        state,
        ..
    } = cx.get(root)
    else {
        return Err(cx.err("expected a scipy.sparse.csr_matrix object"));
    };
    const CSR_MODULES: &[&str] = &[
        "scipy.sparse.csr",
        "scipy.sparse._csr",
        "scipy.sparse",
        "scipy.sparse.compressed",
    ];
    let is_csr_class = |id| cx.is_global(id, CSR_MODULES, "csr_matrix");
    let ok = match kind {
        CallKind::NewObj => is_csr_class(*callable),
        CallKind::Reduce => {
            // copy_reg._reconstructor(csr_matrix, object, None)
            cx.is_global(*callable, &["copy_reg", "copyreg"], "_reconstructor")
                && cx
                    .tuple(*args, "reconstructor args")?
                    .first()
                    .is_some_and(|&c| is_csr_class(c))
        }
    };
    if !ok {
        return Err(cx.err("object is not a scipy.sparse.csr_matrix"));
    }
    let st = state.ok_or_else(|| cx.err("csr_matrix: missing BUILD state"))?;
    let Value::Dict(pairs) = cx.get(st) else {
        return Err(cx.err("csr_matrix: state is not a dict"));
    };
    let field = |k: &str| {
        cx.dict_get(pairs, k)
            .ok_or_else(|| cx.err(format!("csr_matrix: missing field {k:?}")))
    };
    if let Some(f) = cx.dict_get(pairs, "format") {
        if cx.bytes_or_str(f, "format")? != b"csr" {
            return Err(cx.err("csr_matrix: format is not 'csr'"));
        }
    }
    let shape_id = cx
        .dict_get(pairs, "_shape")
        .or_else(|| cx.dict_get(pairs, "shape"))
        .ok_or_else(|| cx.err("csr_matrix: missing field \"_shape\""))?;
    let (rows, cols) = match cx.tuple(shape_id, "csr shape")? {
        [r, c] => (cx.usize(*r, "csr rows")?, cx.usize(*c, "csr cols")?),
        _ => return Err(cx.err("csr_matrix: shape is not 2-D")),
    };
    let int_vec = |a: NdArray, what: &str| -> Result<Vec<i64>> {
        if a.shape.len() != 1 {
            return Err(cx.err(format!("csr_matrix: {what} is not 1-D")));
        }
        match a.data {
            ArrayData::Int(v) => Ok(v),
            ArrayData::Float(_) => Err(cx.err(format!("csr_matrix: {what} is not integer"))),
        }
    };
    let indptr = int_vec(ndarray_at(&cx, field("indptr")?)?, "indptr")?;
    let indices = int_vec(ndarray_at(&cx, field("indices")?)?, "indices")?;
    let data_arr = ndarray_at(&cx, field("data")?)?;
    if data_arr.shape.len() != 1 {
        return Err(cx.err("csr_matrix: data is not 1-D"));
    }
    let data: Vec<f32> = match data_arr.data {
        ArrayData::Float(v) => v.into_iter().map(|x| x as f32).collect(),
        ArrayData::Int(v) => v.into_iter().map(|x| x as f32).collect(),
    };
    let nnz = indices.len();
    if data.len() != nnz {
        return Err(cx.err(format!(
            "csr_matrix: {} data values but {nnz} indices",
            data.len()
        )));
    }
    if rows.checked_add(1) != Some(indptr.len()) {
        return Err(cx.err(format!(
            "csr_matrix: indptr has {} entries for {rows} rows",
            indptr.len()
        )));
    }
    if indptr.first() != Some(&0) {
        return Err(cx.err("csr_matrix: indptr does not start at 0"));
    }
    if indptr.windows(2).any(|w| w[0] > w[1]) {
        return Err(cx.err("csr_matrix: indptr is not monotone"));
    }
    if indptr.last().copied() != i64::try_from(nnz).ok() {
        return Err(cx.err("csr_matrix: indptr does not end at nnz"));
    }
    let mut out_ptr = Vec::with_capacity(indptr.len());
    let mut out_ind: Vec<usize> = Vec::with_capacity(nnz);
    let mut out_val: Vec<f32> = Vec::with_capacity(nnz);
    out_ptr.push(0usize);
    let mut row_buf: Vec<(usize, f32)> = Vec::new();
    for w in indptr.windows(2) {
        // Bounds already validated: 0 <= w[0] <= w[1] <= nnz.
        let (a, b) = (w[0] as usize, w[1] as usize);
        row_buf.clear();
        for k in a..b {
            let c = indices[k];
            let c = usize::try_from(c)
                .ok()
                .filter(|&c| c < cols)
                .ok_or_else(|| {
                    cx.err(format!(
                        "csr_matrix: column index {c} out of range 0..{cols}"
                    ))
                })?;
            row_buf.push((c, data[k]));
        }
        row_buf.sort_by_key(|e| e.0);
        for &(c, v) in &row_buf {
            if out_ind.len() > *out_ptr.last().unwrap_or(&0) && out_ind.last() == Some(&c) {
                if let Some(last) = out_val.last_mut() {
                    *last += v;
                }
            } else {
                out_ind.push(c);
                out_val.push(v);
            }
        }
        out_ptr.push(out_ind.len());
    }
    sprs::CsMat::try_new((rows, cols), out_ptr, out_ind, out_val)
        .map_err(|(_, _, _, e)| cx.err(format!("csr_matrix: invalid structure: {e}")))
}

/// Decodes a pickled `collections.defaultdict(list)` (or plain dict) mapping
/// non-negative integers to lists of non-negative integers, in insertion
/// order. A key that appears twice keeps its last value (dict semantics).
pub fn decode_int_list_dict(bytes: &[u8], path: &str) -> Result<Vec<(usize, Vec<usize>)>> {
    let p = Pickle::parse(bytes, path)?;
    let cx = Ctx { p: &p, path };
    let pairs = cx.dict_items(p.root())?;
    let mut pos: HashMap<usize, usize> = HashMap::new();
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    for &(k, v) in pairs {
        let key = cx.usize(k, "graph key")?;
        let ids: &[ValueId] = match cx.get(v) {
            Value::List(l) | Value::Tuple(l) => l,
            _ => return Err(cx.err(format!("graph value for key {key} is not a list"))),
        };
        let list = ids
            .iter()
            .map(|&i| cx.usize(i, "graph neighbour"))
            .collect::<Result<Vec<_>>>()?;
        match pos.get(&key) {
            Some(&i) => out[i].1 = list,
            None => {
                pos.insert(key, out.len());
                out.push((key, list));
            }
        }
    }
    Ok(out)
}

/// Decodes a pickled `dict` (or `collections.defaultdict`) mapping
/// non-negative integers to dense `numpy.ndarray`s, in insertion order (a
/// key that appears twice keeps its last value). ASGCN's `.raw.graph`
/// files have this shape: sample index -> `n x n` adjacency.
pub fn decode_int_ndarray_dict(bytes: &[u8], path: &str) -> Result<Vec<(usize, NdArray)>> {
    let p = Pickle::parse(bytes, path)?;
    let cx = Ctx { p: &p, path };
    let pairs = cx.dict_items(p.root())?;
    let mut pos: HashMap<usize, usize> = HashMap::new();
    let mut out: Vec<(usize, NdArray)> = Vec::new();
    for &(k, v) in pairs {
        let key = cx.usize(k, "dict key")?;
        let arr = ndarray_at(&cx, v).map_err(|e| match e {
            Error::Format { path, reason } => Error::Format {
                path,
                reason: format!("value for key {key}: {reason}"),
            },
            other => other,
        })?;
        match pos.get(&key) {
            Some(&i) => out[i].1 = arr,
            None => {
                pos.insert(key, out.len());
                out.push((key, arr));
            }
        }
    }
    Ok(out)
}
