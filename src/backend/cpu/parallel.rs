//! A parallel loop in which the calling thread takes part and never waits
//! for a helper that has not started.
//!
//! `rayon`'s parallel iterators, called from a thread outside the pool (the
//! usual case: a training loop on the main thread), inject the whole loop
//! into the pool and put the caller to sleep until a worker finishes it. For
//! kernels of tens of microseconds (SpMM on Cora's operator) the two
//! cross-thread wake-ups that costs are a large part of the call, and even a
//! scope in which the caller works (`rayon::in_place_scope`) must wait at its
//! end for every spawned helper to run, however late its worker wakes.
//!
//! [`for_each_chunk`] instead hands chunks out from one shared counter to the
//! caller and to up to `threads - 1` helpers. When the caller finds no
//! chunk left it closes the counter and waits only for chunks that helpers
//! are processing at that moment; a helper that starts later finds the
//! counter closed and returns without touching the data.
//!
//! The helpers are threads of this module (at most
//! `rayon::current_num_threads() - 1` join a call; `RAYON_NUM_THREADS` and
//! `ThreadPool::install` set that number as for rayon's own loops). Between
//! calls an idle helper spins for [`board::SPIN`] before it sleeps: the
//! kernels of a training step follow each other within microseconds, and a
//! sleeping thread takes tens of microseconds to wake (a rayon worker that
//! has gone to sleep, which the first version woke for every call; Cora's
//! HDGCN step went from 7.4 to 6.8 ms, the median of five interleaved runs
//! each, with the helpers).

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

/// The per-chunk work, with its borrows' lifetime erased (see [`Shared`]).
type Task = dyn Fn(usize) + Sync;

/// A pointer to the caller's task. Sound to share because the task is only
/// called for a chunk handed out before the caller closes the counter, and
/// the caller does not return (so the task stays alive) until every such
/// chunk is finished.
struct TaskPtr(*const Task);
// SAFETY: the pointee is `Sync`; its lifetime is guarded by the protocol
// described on `TaskPtr`.
unsafe impl Send for TaskPtr {}
// SAFETY: as above.
unsafe impl Sync for TaskPtr {}

/// Chunk counter and bookkeeping of one [`for_each_chunk`] call.
struct State {
    /// Next chunk to hand out.
    next: usize,
    /// No chunk is handed out any more.
    closed: bool,
    /// Chunks being processed by helpers or the caller right now.
    active: usize,
    /// The first panic raised by the task, re-raised on the caller.
    panic: Option<Box<dyn Any + Send>>,
}

struct Shared {
    state: Mutex<State>,
    chunks: usize,
    task: TaskPtr,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The task never runs under the lock, so it cannot be poisoned by
        // it; recover anyway rather than panic on a poisoned lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes chunks until none is left (or the call is closed).
    fn work(&self) {
        loop {
            let i = {
                let mut s = self.lock();
                if s.closed || s.next >= self.chunks {
                    return;
                }
                s.next += 1;
                s.active += 1;
                s.next - 1
            };
            // SAFETY: chunk `i` was handed out while the call was open, so
            // the caller is still inside `for_each_chunk` and keeps the task
            // alive until `active` drops back to zero.
            let task = unsafe { &*self.task.0 };
            let result = panic::catch_unwind(AssertUnwindSafe(|| task(i)));
            let mut s = self.lock();
            s.active -= 1;
            if let Err(p) = result {
                s.closed = true;
                s.panic.get_or_insert(p);
            }
        }
    }

    /// Closes the counter and waits until no chunk is being processed.
    fn close_and_wait(&self) {
        self.lock().closed = true;
        let mut spins = 0u32;
        while self.lock().active > 0 {
            if spins < 1 << 10 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Calls `f(i, chunk)` for every chunk `i` of `data.chunks_mut(chunk_len)`,
/// spread over the calling thread and up to `rayon::current_num_threads() - 1`
/// helper threads (see the module documentation). Returns when every chunk is done; a panic in `f` is
/// re-raised here once no chunk is running. `chunk_len` must be positive.
pub(crate) fn for_each_chunk<T: Send, F>(data: &mut [T], chunk_len: usize, f: F)
where
    F: Fn(usize, &mut [T]) + Sync,
{
    let chunk_len = chunk_len.max(1);
    let len = data.len();
    let chunks = len.div_ceil(chunk_len);
    let helpers = rayon::current_num_threads().min(chunks).saturating_sub(1);
    if helpers == 0 {
        for (i, c) in data.chunks_mut(chunk_len).enumerate() {
            f(i, c);
        }
        return;
    }
    // `usize` so that the closure is `Sync`; chunks are disjoint and each
    // index is handed out once, so no two `&mut` slices overlap.
    let base = data.as_mut_ptr() as usize;
    let task = move |i: usize| {
        let start = i * chunk_len;
        let n = chunk_len.min(len - start);
        // SAFETY: `start + n <= len`, chunk `i` is handed to one thread only,
        // and `data` is mutably borrowed for the whole call.
        let chunk = unsafe { std::slice::from_raw_parts_mut((base as *mut T).add(start), n) };
        f(i, chunk)
    };
    let task: &(dyn Fn(usize) + Sync + '_) = &task;
    // SAFETY: only the lifetime is erased; see `TaskPtr` for why the task
    // is never called after this function returns.
    let task: *const Task =
        unsafe { std::mem::transmute(task as *const (dyn Fn(usize) + Sync + '_)) };
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            next: 0,
            closed: false,
            active: 0,
            panic: None,
        }),
        chunks,
        task: TaskPtr(task),
    });
    board::post(&shared, helpers);
    shared.work();
    shared.close_and_wait();
    let panic = shared.lock().panic.take();
    if let Some(p) = panic {
        panic::resume_unwind(p);
    }
}

/// Helper threads that wait for work spinning for a while before they
/// sleep, so that the kernels of one training step, which follow each other
/// within microseconds, find them awake.
mod board {
    use super::Shared;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex, OnceLock};
    use std::time::{Duration, Instant};

    /// How long an idle helper spins before it sleeps.
    pub(super) const SPIN: Duration = Duration::from_micros(200);

    /// A call offered to the helpers.
    #[derive(Clone)]
    struct Posted {
        shared: Arc<Shared>,
        /// How many helpers it takes.
        helpers: usize,
        /// How many have joined.
        joined: Arc<AtomicUsize>,
    }

    struct Board {
        /// The latest call.
        job: Mutex<Option<Posted>>,
        /// Bumped with every posted call.
        generation: AtomicU64,
        /// Helpers asleep on `wake`.
        sleepers: AtomicUsize,
        wake: Condvar,
        /// Helper threads started so far.
        started: Mutex<usize>,
    }

    fn board() -> &'static Board {
        static BOARD: OnceLock<Board> = OnceLock::new();
        BOARD.get_or_init(|| Board {
            job: Mutex::new(None),
            generation: AtomicU64::new(0),
            sleepers: AtomicUsize::new(0),
            wake: Condvar::new(),
            started: Mutex::new(0),
        })
    }

    /// Offers `shared` to up to `helpers` helper threads (started on first
    /// use).
    pub(super) fn post(shared: &Arc<Shared>, helpers: usize) {
        let b = board();
        {
            let mut started = b.started.lock().unwrap_or_else(|e| e.into_inner());
            while *started < helpers {
                *started += 1;
                let _ = std::thread::Builder::new()
                    .name("hdgcn-helper".into())
                    .spawn(helper);
            }
        }
        let mut job = b.job.lock().unwrap_or_else(|e| e.into_inner());
        *job = Some(Posted {
            shared: Arc::clone(shared),
            helpers,
            joined: Arc::new(AtomicUsize::new(0)),
        });
        b.generation.fetch_add(1, Ordering::Release);
        if b.sleepers.load(Ordering::Relaxed) > 0 {
            b.wake.notify_all();
        }
    }

    fn helper() {
        let b = board();
        let mut seen = b.generation.load(Ordering::Acquire);
        loop {
            let t0 = Instant::now();
            let mut spins = 0u32;
            loop {
                let g = b.generation.load(Ordering::Acquire);
                if g != seen {
                    seen = g;
                    break;
                }
                std::hint::spin_loop();
                spins += 1;
                if spins % 256 == 0 && t0.elapsed() > SPIN {
                    let mut job = b.job.lock().unwrap_or_else(|e| e.into_inner());
                    b.sleepers.fetch_add(1, Ordering::Relaxed);
                    while b.generation.load(Ordering::Acquire) == seen {
                        job = b.wake.wait(job).unwrap_or_else(|e| e.into_inner());
                    }
                    b.sleepers.fetch_sub(1, Ordering::Relaxed);
                    drop(job);
                }
            }
            let job = b.job.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(p) = job
                && p.joined.fetch_add(1, Ordering::AcqRel) < p.helpers
            {
                p.shared.work();
            }
        }
    }
}

/// Entries from which [`for_each_part`] splits a kernel over the pool: below
/// this an element-wise pass lasts a few microseconds, about what handing
/// work to another core costs.
pub(crate) const PART_MIN: usize = 1 << 15;

/// Calls `f(start, part)` for parts of `data` that cover it in order, `start`
/// being the index of the part's first entry: `data` whole on the calling
/// thread below [`PART_MIN`] entries, else parts of a multiple of `align`
/// entries (whole rows of `align` columns, whole mask words) spread over the
/// pool by [`for_each_chunk`], about four per thread so that a helper that
/// starts late leaves its share to the others. For kernels that compute each
/// entry (or each `align`-entry group) on its own, so that the result does not
/// depend on the split.
pub(crate) fn for_each_part<T: Send>(
    data: &mut [T],
    align: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    for_each_part_from(data, align, PART_MIN, f)
}

/// [`for_each_part`] split from `min` entries on: a kernel that spends
/// tens of nanoseconds per entry (an exponential, a `tanh`) pays for the
/// hand-over on far fewer entries than a copy does.
pub(crate) fn for_each_part_from<T: Send>(
    data: &mut [T],
    align: usize,
    min: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    match part_len(data.len(), align, min) {
        Some(part) => for_each_chunk(data, part, |i, c| f(i * part, c)),
        None if data.is_empty() => {}
        None => f(0, data),
    }
}

/// The entries of one part when a kernel over `len` entries is split from
/// `min` entries on (see [`for_each_part_from`]): about four parts per
/// thread, a multiple of `align`; `None` when it is not split (fewer
/// entries, or one thread).
pub(crate) fn part_len(len: usize, align: usize, min: usize) -> Option<usize> {
    let threads = rayon::current_num_threads();
    if len < min.max(2) || threads < 2 {
        return None;
    }
    Some(
        len.div_ceil(4 * threads)
            .max(min / 4)
            .next_multiple_of(align.max(1)),
    )
}

/// Entries from which a kernel of an exponential or a `tanh` per entry is
/// split (see [`for_each_part_from`]).
pub(crate) const PART_MIN_COSTLY: usize = 1 << 11;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_is_visited_once_with_its_index() {
        for (len, chunk) in [(0, 3), (1, 3), (10, 3), (1000, 7), (4096, 64)] {
            let mut data = vec![usize::MAX; len];
            for_each_chunk(&mut data, chunk, |i, c| {
                for (j, v) in c.iter_mut().enumerate() {
                    assert_eq!(*v, usize::MAX, "visited twice");
                    *v = i * chunk + j;
                }
            });
            assert!(
                data.iter().enumerate().all(|(k, &v)| k == v),
                "{len} {chunk}"
            );
        }
    }

    #[test]
    fn repeated_calls_with_late_helpers_write_every_chunk_once() {
        // Many short calls on a pool with more workers than cores: helpers
        // regularly start after the caller has closed the counter, and each
        // call must still see every element written exactly once.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..2000 {
            let len = (next() % 300) as usize;
            let chunk = 1 + (next() % 40) as usize;
            let mut data = vec![0u8; len];
            let run = |data: &mut [u8]| {
                for_each_chunk(data, chunk, |i, c| {
                    assert!(i * chunk < len.max(1));
                    c.iter_mut().for_each(|v| *v += 1);
                })
            };
            if next() % 2 == 0 {
                pool.install(|| run(&mut data));
            } else {
                run(&mut data);
            }
            assert!(data.iter().all(|&v| v == 1), "len {len} chunk {chunk}");
        }
    }

    #[test]
    fn a_panic_in_the_task_reaches_the_caller() {
        let mut data = vec![0u32; 4096];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for_each_chunk(&mut data, 64, |i, c| {
                if i == 37 {
                    panic!("chunk 37");
                }
                c.iter_mut().for_each(|v| *v = 1);
            })
        }));
        let msg = r.expect_err("the panic must propagate");
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"chunk 37"));
        // The data is still usable and no thread writes to it any more.
        data.iter_mut().for_each(|v| *v = 2);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(data.iter().all(|&v| v == 2));
    }

    #[test]
    fn runs_inside_a_pool_and_nested() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let mut outer = vec![0u64; 64];
        pool.install(|| {
            for_each_chunk(&mut outer, 8, |i, c| {
                let mut inner = vec![0u64; 100];
                for_each_chunk(&mut inner, 9, |_, d| d.iter_mut().for_each(|v| *v = 1));
                c.iter_mut()
                    .for_each(|v| *v = i as u64 + inner.iter().sum::<u64>());
            })
        });
        assert!(
            outer
                .iter()
                .enumerate()
                .all(|(k, &v)| v == (k / 8) as u64 + 100)
        );
    }

    #[test]
    fn parts_cover_the_data_in_aligned_pieces() {
        for (len, align) in [
            (0, 1),
            (5, 1),
            (PART_MIN - 1, 7),
            (PART_MIN, 64),
            (PART_MIN * 5 + 3, 32),
            (1 << 20, 10),
        ] {
            let mut data = vec![usize::MAX; len];
            for_each_part(&mut data, align, |start, part| {
                assert!(start % align == 0, "part at {start} not aligned to {align}");
                for (j, v) in part.iter_mut().enumerate() {
                    assert_eq!(*v, usize::MAX, "visited twice");
                    *v = start + j;
                }
            });
            assert!(
                data.iter().enumerate().all(|(k, &v)| k == v),
                "{len} {align}"
            );
        }
    }
}
