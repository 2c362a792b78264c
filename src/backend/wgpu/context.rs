//! The device context of the wgpu backend: adapter and device, the pipeline
//! cache, the buffer pool, and the command recorder that batches dispatches
//! into few submissions.
//!
//! # Execution model
//!
//! Every kernel call records one compute dispatch into a shared
//! [`wgpu::CommandEncoder`]; nothing is submitted until the host needs data
//! back ([`Context::read`]), the parameter ring is full, or
//! [`Context::flush`] is called. A whole training step therefore runs as one
//! (or a few) submissions.
//!
//! Kernel parameters (sizes, scalars) go into a uniform *parameter ring*: one
//! 256-byte slot per dispatch, written to the GPU once per submission.
//!
//! Buffers come from a size-bucketed pool. A tensor's buffer returns to the
//! pool when the last handle drops; since all work runs in recording order on
//! one queue, a buffer may be reused by later dispatches even before the
//! submission that read it has finished. Buffers created with their
//! contents (uploads) are freed on drop instead, so the pool holds only
//! sizes that kernels allocate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use crate::error::{Error, Result};

/// Workgroup size of all one-dimensional kernels (must match `WG` in the prelude).
pub(crate) const WG: u32 = 256;
/// Bytes per parameter slot (the maximum `min_uniform_buffer_offset_alignment`).
const SLOT: u64 = 256;
/// Parameter words per dispatch.
pub(crate) const MAX_PARAMS: usize = 16;
/// Parameter slots per submission.
const RING_SLOTS: u64 = 2048;

/// WGSL prepended to every shader: the parameter block and the
/// linear-invocation helper that undoes dispatch splitting, and the
/// counter-based dropout hash shared with `backend::rng`.
const PRELUDE: &str = include_str!("shaders/prelude.wgsl");

/// A compute kernel: a WGSL source (without the prelude) and an entry point.
///
/// Each entry point must use the parameter block (`P`) and every storage
/// binding `1..=k` it is dispatched with, and nothing else: pipelines use
/// layouts derived from the shader.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kernel {
    /// Unique name of the source (cache key with the entry point).
    pub module: &'static str,
    /// WGSL source.
    pub source: &'static str,
    /// Entry point.
    pub entry: &'static str,
}

/// A GPU buffer. One from [`Context::alloc`] returns to the pool on drop;
/// one from [`Context::upload_bytes`] is freed (see there).
pub(crate) struct Buf {
    raw: Option<wgpu::Buffer>,
    pool: Option<Arc<Mutex<Pool>>>,
}

impl Buf {
    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        self.raw.as_ref().expect("live buffer")
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if let Some(b) = self.raw.take()
            && let Some(pool) = &self.pool
            && let Ok(mut pool) = pool.lock()
        {
            pool.give(b);
        }
    }
}

impl std::fmt::Debug for Buf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buf({} bytes)", self.raw().size())
    }
}

/// Free buffers by exact (rounded) size.
#[derive(Default)]
pub(crate) struct Pool {
    free: HashMap<u64, Vec<wgpu::Buffer>>,
    bytes: u64,
}

/// Largest total size the pool keeps; beyond it freed buffers are destroyed.
const POOL_CAP_BYTES: u64 = 2 << 30;

impl Pool {
    /// Number of free buffers held.
    pub(crate) fn buffers(&self) -> usize {
        self.free.values().map(Vec::len).sum()
    }

    /// Total size of the free buffers held, in bytes.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Frees every buffer held.
    pub(crate) fn clear(&mut self) {
        self.free.clear();
        self.bytes = 0;
    }

    fn take(&mut self, size: u64) -> Option<wgpu::Buffer> {
        let b = self.free.get_mut(&size)?.pop()?;
        self.bytes -= size;
        Some(b)
    }

    fn give(&mut self, b: wgpu::Buffer) {
        let size = b.size();
        if self.bytes + size > POOL_CAP_BYTES {
            return;
        }
        self.bytes += size;
        self.free.entry(size).or_default().push(b);
    }
}

/// Commands recorded but not yet submitted.
struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    params: Vec<u8>,
    ring: wgpu::Buffer,
}

/// Device, queue, caches and the recorder. Shared by all clones of a
/// [`Wgpu`](super::Wgpu) backend.
pub(crate) struct Context {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pipelines: Mutex<HashMap<(&'static str, &'static str), Arc<wgpu::ComputePipeline>>>,
    pool: Arc<Mutex<Pool>>,
    recorder: Mutex<Recorder>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish()
    }
}

fn round_size(bytes: u64) -> u64 {
    bytes.max(16).div_ceil(256) * 256
}

impl Context {
    /// Opens the adapter chosen by wgpu's environment variables
    /// (`WGPU_BACKEND`, `WGPU_ADAPTER_NAME`, `WGPU_POWER_PREF`) and a device
    /// with the adapter's full limits.
    pub(crate) fn new() -> Result<Self> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(select_adapter(&instance))?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("hdgcn"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| Error::Backend(format!("wgpu: cannot open a device on {}: {e}", info.name)))?;
        let ring = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("hdgcn params"),
            size: SLOT * RING_SLOTS,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(Context {
            device,
            queue,
            info,
            limits,
            pipelines: Mutex::new(HashMap::new()),
            pool: Arc::new(Mutex::new(Pool::default())),
            recorder: Mutex::new(Recorder {
                encoder: None,
                params: Vec::new(),
                ring,
            }),
        })
    }

    /// Largest storage binding, in `f32` entries.
    pub(crate) fn max_binding_elems(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
            / 4
    }

    /// A pooled storage buffer of at least `bytes` bytes (contents undefined).
    pub(crate) fn alloc(&self, bytes: u64) -> Buf {
        let size = round_size(bytes);
        assert!(
            size <= self.limits.max_buffer_size
                && size <= self.limits.max_storage_buffer_binding_size,
            "wgpu: a {bytes}-byte tensor exceeds this adapter's largest buffer binding ({} bytes)",
            self.limits.max_storage_buffer_binding_size
        );
        let pooled = self.pool.lock().expect("pool lock").take(size);
        let raw = pooled.unwrap_or_else(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        Buf {
            raw: Some(raw),
            pool: Some(self.pool.clone()),
        }
    }

    /// A new buffer holding `data` (written at creation, so it is ordered
    /// before every later dispatch).
    ///
    /// It is freed on drop, not pooled: uploads never take a pooled buffer
    /// (writing one with `Queue::write_buffer` would run before commands
    /// still recorded against its previous contents), so pooling them would
    /// add one buffer to the pool per upload, up to the pool's byte cap
    /// (tens of thousands of small buffers over a training run).
    pub(crate) fn upload_bytes(&self, data: &[u8]) -> Buf {
        let size = round_size(data.len() as u64);
        let mut contents = data.to_vec();
        contents.resize(size as usize, 0);
        let raw = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: &contents,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            });
        Buf {
            raw: Some(raw),
            pool: None,
        }
    }

    /// The pool of free buffers (for statistics and clearing).
    pub(crate) fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().expect("pool lock")
    }

    fn pipeline(&self, k: &Kernel) -> Arc<wgpu::ComputePipeline> {
        let mut cache = self.pipelines.lock().expect("pipeline lock");
        cache
            .entry((k.module, k.entry))
            .or_insert_with(|| {
                let source = format!("{PRELUDE}\n{}", k.source);
                let module = self
                    .device
                    .create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(k.module),
                        source: wgpu::ShaderSource::Wgsl(source.into()),
                    });
                Arc::new(
                    self.device
                        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                            label: Some(k.entry),
                            layout: None,
                            module: &module,
                            entry_point: Some(k.entry),
                            compilation_options: Default::default(),
                            cache: None,
                        }),
                )
            })
            .clone()
    }

    /// Runs `f` with the open encoder (opening one if needed).
    pub(crate) fn with_encoder<R>(&self, f: impl FnOnce(&mut wgpu::CommandEncoder) -> R) -> R {
        let mut rec = self.recorder.lock().expect("recorder lock");
        let enc = rec.encoder.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        });
        f(enc)
    }

    /// Records a one-dimensional dispatch of `threads` invocations
    /// (split over two grid dimensions beyond 65,535 workgroups; kernels
    /// recover the linear index with `linear_id`).
    pub(crate) fn dispatch(&self, k: &Kernel, params: &[u32], bufs: &[&Buf], threads: u64) {
        if threads == 0 {
            return;
        }
        let groups = threads.div_ceil(u64::from(WG));
        self.dispatch_grid(k, params, bufs, [groups, 1])
    }

    /// Records a dispatch of `grid[0] x grid[1]` workgroups. The first
    /// dimension is split over `x` and `z` when it exceeds the per-dimension
    /// limit; kernels recover it with `group_x`.
    pub(crate) fn dispatch_grid(&self, k: &Kernel, params: &[u32], bufs: &[&Buf], grid: [u64; 2]) {
        if grid[0] == 0 || grid[1] == 0 {
            return;
        }
        assert!(params.len() <= MAX_PARAMS, "too many kernel parameters");
        let max = u64::from(self.limits.max_compute_workgroups_per_dimension);
        assert!(grid[1] <= max, "grid y dimension {} exceeds {max}", grid[1]);
        let (x, z) = if grid[0] <= max {
            (grid[0], 1)
        } else {
            let z = grid[0].div_ceil(max);
            (grid[0].div_ceil(z), z)
        };
        assert!(z <= max, "grid too large");
        let pipeline = self.pipeline(k);
        let mut rec = self.recorder.lock().expect("recorder lock");
        if rec.params.len() as u64 >= SLOT * RING_SLOTS {
            self.submit_locked(&mut rec);
        }
        let offset = rec.params.len() as u64;
        for &w in params {
            rec.params.extend_from_slice(&w.to_le_bytes());
        }
        rec.params.resize((offset + SLOT) as usize, 0);

        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &rec.ring,
                offset,
                size: wgpu::BufferSize::new((MAX_PARAMS * 4) as u64),
            }),
        }];
        for (i, b) in bufs.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.raw().as_entire_binding(),
            });
        }
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let enc = rec.encoder.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        });
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(x as u32, grid[1] as u32, z as u32);
    }

    /// Records a buffer-to-buffer copy of `bytes` bytes.
    pub(crate) fn copy(&self, src: &Buf, src_off: u64, dst: &Buf, dst_off: u64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.with_encoder(|enc| {
            enc.copy_buffer_to_buffer(src.raw(), src_off, dst.raw(), dst_off, bytes)
        });
    }

    fn submit_locked(&self, rec: &mut Recorder) {
        let enc = rec.encoder.take();
        if !rec.params.is_empty() {
            self.queue.write_buffer(&rec.ring, 0, &rec.params);
            rec.params.clear();
        }
        if let Some(enc) = enc {
            self.queue.submit([enc.finish()]);
        }
    }

    /// Submits everything recorded so far.
    pub(crate) fn flush(&self) {
        let mut rec = self.recorder.lock().expect("recorder lock");
        self.submit_locked(&mut rec);
    }

    /// Submits everything recorded so far and waits until the device is idle.
    pub(crate) fn wait(&self) {
        self.flush();
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap_or_else(|e| panic!("wgpu: device lost while waiting: {e}"));
    }

    /// Copies the first `bytes` bytes of `src` back to the host (submits and waits).
    pub(crate) fn read(&self, src: &Buf, bytes: u64) -> Vec<u8> {
        self.read_many(&[(src, bytes)]).pop().expect("one read")
    }

    /// The first `bytes` of each buffer, read back with one submission and
    /// one map (each copy starts at a 4-byte aligned offset of a shared
    /// staging buffer).
    pub(crate) fn read_many(&self, srcs: &[(&Buf, u64)]) -> Vec<Vec<u8>> {
        let sizes: Vec<u64> = srcs
            .iter()
            .map(|&(_, bytes)| bytes.div_ceil(4) * 4)
            .collect();
        let total: u64 = sizes.iter().sum();
        if total == 0 {
            return vec![Vec::new(); srcs.len()];
        }
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("hdgcn readback"),
            size: total,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        {
            let mut rec = self.recorder.lock().expect("recorder lock");
            let enc = rec.encoder.get_or_insert_with(|| {
                self.device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
            });
            let mut offset = 0;
            for (&(src, _), &size) in srcs.iter().zip(&sizes) {
                if size > 0 {
                    enc.copy_buffer_to_buffer(src.raw(), 0, &staging, offset, size);
                }
                offset += size;
            }
            self.submit_locked(&mut rec);
        }
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap_or_else(|e| panic!("wgpu: device lost while waiting for results: {e}"));
        rx.recv()
            .expect("map callback ran")
            .unwrap_or_else(|e| panic!("wgpu: cannot map the readback buffer: {e}"));
        let view = slice
            .get_mapped_range()
            .unwrap_or_else(|e| panic!("wgpu: cannot read the readback buffer: {e}"));
        let mut out = Vec::with_capacity(srcs.len());
        let mut offset = 0;
        for (&(_, bytes), &size) in srcs.iter().zip(&sizes) {
            out.push(view[offset as usize..(offset + bytes) as usize].to_vec());
            offset += size;
        }
        drop(view);
        staging.unmap();
        out
    }
}

async fn select_adapter(instance: &wgpu::Instance) -> Result<wgpu::Adapter> {
    if let Ok(wanted) = std::env::var("WGPU_ADAPTER_NAME") {
        let wanted = wanted.to_lowercase();
        let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
        let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
        return adapters
            .into_iter()
            .find(|a| a.get_info().name.to_lowercase().contains(&wanted))
            .ok_or_else(|| {
                Error::Backend(format!(
                    "wgpu: WGPU_ADAPTER_NAME={wanted:?} matches no adapter (found: {names:?})"
                ))
            });
    }
    instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::from_env().unwrap_or_default(),
            ..Default::default()
        })
        .await
        .map_err(|e| {
            Error::Backend(format!(
                "wgpu: no GPU adapter available ({e}); on Linux without a GPU install Mesa's \
                 Vulkan driver (apt-get install mesa-vulkan-drivers) and set WGPU_BACKEND=vulkan"
            ))
        })
}
