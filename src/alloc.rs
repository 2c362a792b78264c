//! [`BlockCache`]: an opt-in global allocator that keeps large freed blocks
//! for reuse, within the most memory large blocks ever took at once.
//!
//! A full-batch step on a graph of millions of nodes makes the same few
//! tensors every step (at 10^6 nodes and hidden width 64, 256 MB each).
//! glibc serves every block above 32 MiB with a fresh `mmap` and gives it
//! back with `munmap` when it is freed, so each step faults in and zeroes
//! its large tensors again, page by page; on the 2-core development machine
//! that was about 14 % of a 10^6-node GCN step (`docs/performance.md`).
//! Telling glibc to keep such blocks in its heap removes that time but
//! raises the peak, because the heap keeps freed blocks where they fall.
//!
//! `BlockCache` keeps freed blocks of at least [`BlockCache::threshold`]
//! bytes and hands one back when a block of exactly the same size and
//! alignment is asked for, under one bound: the large blocks mapped
//! (live plus cached) never exceed the largest total of large blocks the
//! program has had live at once. A request that would cross that bound
//! first gives cached blocks back to the system. So the large blocks never
//! take more memory than their own peak without the cache. Small blocks
//! are not counted: after a phase that used more large blocks than the
//! one that follows, the cache may hold up to the difference until a
//! request needs the room, and what the next phase allocates in small
//! blocks comes on top (loading a graph from files, the `full_batch`
//! example measured 11.7 MB above the same phase without the cache).
//! [`BlockCache::release_cached`] at the end of such a phase gives the
//! cached blocks back at once.
//!
//! It is a library's tool, not a default: a program opts in with
//! `#[global_allocator]`, as the `full_batch` example does.
//!
//! ```
//! use hdgcn::alloc::BlockCache;
//!
//! #[global_allocator]
//! static ALLOC: BlockCache = BlockCache::new();
//!
//! fn main() {
//!     let big = vec![1.0f32; 10 << 20]; // 40 MiB: above the threshold
//!     let first = big.as_ptr() as usize;
//!     drop(big);
//!     let again = vec![0.0f32; 10 << 20]; // the same size: the same block, zeroed
//!     assert_eq!(again.as_ptr() as usize, first);
//!     assert!(again.iter().all(|&v| v == 0.0));
//!     assert!(ALLOC.stats().hits >= 1);
//! }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Cached blocks at most (each slot is one freed block).
const SLOTS: usize = 32;

/// The default threshold: 32 MiB, glibc's largest `mmap` threshold (blocks
/// below it come from glibc's heap, which reuses them already).
pub const DEFAULT_THRESHOLD: usize = 32 << 20;

/// A global allocator over [`System`] that reuses large freed blocks of the
/// same size (see the [module documentation](self)).
#[derive(Debug)]
pub struct BlockCache {
    threshold: usize,
    caching: AtomicBool,
    state: Mutex<State>,
}

/// What a [`BlockCache`] has done so far ([`BlockCache::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockCacheStats {
    /// Large requests served from the cache.
    pub hits: u64,
    /// Large requests passed to the system allocator.
    pub misses: u64,
    /// Cached blocks given back to the system to keep within the bound.
    pub evicted: u64,
    /// Bytes in large blocks the program holds now.
    pub live_bytes: usize,
    /// Bytes in large blocks the cache holds now.
    pub cached_bytes: usize,
    /// The most bytes in large blocks the program has held at once: the
    /// bound on live plus cached bytes.
    pub high_water_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    addr: usize,
    size: usize,
    align: usize,
}

const EMPTY: Slot = Slot {
    addr: 0,
    size: 0,
    align: 0,
};

/// Blocks to give back to the system, collected under the lock and freed
/// after it.
struct Evicted {
    slots: [Slot; SLOTS],
    len: usize,
}

impl Evicted {
    fn none() -> Self {
        Evicted {
            slots: [EMPTY; SLOTS],
            len: 0,
        }
    }

    fn push(&mut self, s: Slot) {
        self.slots[self.len] = s;
        self.len += 1;
    }

    fn as_slice(&self) -> &[Slot] {
        &self.slots[..self.len]
    }
}

/// The cache's bookkeeping, apart from any memory (so it can be tested with
/// made-up addresses).
#[derive(Debug)]
struct State {
    live: usize,
    cached: usize,
    high_water: usize,
    slots: [Slot; SLOTS],
    hits: u64,
    misses: u64,
    evicted: u64,
}

impl State {
    const fn new() -> Self {
        State {
            live: 0,
            cached: 0,
            high_water: 0,
            slots: [EMPTY; SLOTS],
            hits: 0,
            misses: 0,
            evicted: 0,
        }
    }

    /// A cached block of exactly this size and alignment, now live.
    fn take(&mut self, size: usize, align: usize) -> Option<usize> {
        let i = self
            .slots
            .iter()
            .position(|s| s.size == size && s.align == align)?;
        let slot = std::mem::replace(&mut self.slots[i], EMPTY);
        self.cached -= size;
        self.live += size;
        self.hits += 1;
        Some(slot.addr)
    }

    /// Counts `size` new live bytes from the system, raising the high-water
    /// mark if the live total passes it, and removes the cached blocks that
    /// must go back to keep live plus cached within it.
    fn reserve(&mut self, size: usize) -> Evicted {
        self.misses += 1;
        self.live += size;
        self.high_water = self.high_water.max(self.live);
        let mut out = Evicted::none();
        while self.live + self.cached > self.high_water {
            let deficit = self.live + self.cached - self.high_water;
            // The smallest block that covers the deficit, else the largest.
            let pick = self
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.size >= deficit)
                .min_by_key(|(_, s)| s.size)
                .or_else(|| {
                    self.slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.size > 0)
                        .max_by_key(|(_, s)| s.size)
                })
                .map(|(i, _)| i);
            let Some(i) = pick else { break };
            let slot = std::mem::replace(&mut self.slots[i], EMPTY);
            self.cached -= slot.size;
            self.evicted += 1;
            out.push(slot);
        }
        out
    }

    /// A live block freed: kept in a free slot when `keep`, otherwise the
    /// caller gives it back. Returns whether it was kept.
    fn release(&mut self, addr: usize, size: usize, align: usize, keep: bool) -> bool {
        self.live = self.live.saturating_sub(size);
        if !keep {
            return false;
        }
        // Live plus cached is unchanged, so the bound still holds.
        match self.slots.iter().position(|s| s.size == 0) {
            Some(i) => {
                self.slots[i] = Slot { addr, size, align };
                self.cached += size;
                true
            }
            None => false,
        }
    }

    /// Every cached block, removed.
    fn drain(&mut self) -> Evicted {
        let mut out = Evicted::none();
        for s in self.slots.iter_mut().filter(|s| s.size > 0) {
            out.push(std::mem::replace(s, EMPTY));
        }
        self.cached = 0;
        out
    }

    fn stats(&self) -> BlockCacheStats {
        BlockCacheStats {
            hits: self.hits,
            misses: self.misses,
            evicted: self.evicted,
            live_bytes: self.live,
            cached_bytes: self.cached,
            high_water_bytes: self.high_water,
        }
    }
}

impl Default for BlockCache {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockCache {
    /// A cache for blocks of at least [`DEFAULT_THRESHOLD`] bytes.
    pub const fn new() -> Self {
        Self::with_threshold(DEFAULT_THRESHOLD)
    }

    /// A cache for blocks of at least `threshold` bytes (at least one page:
    /// smaller values are raised to 4096).
    pub const fn with_threshold(threshold: usize) -> Self {
        BlockCache {
            threshold: if threshold < 4096 { 4096 } else { threshold },
            caching: AtomicBool::new(true),
            state: Mutex::new(State::new()),
        }
    }

    /// The smallest block, in bytes, that the cache keeps.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Turns reuse on or off. Off, every block goes straight to the system
    /// (the cached ones are given back now); the counts go on.
    pub fn set_caching(&self, on: bool) {
        self.caching.store(on, Ordering::Relaxed);
        if !on {
            self.release_cached();
        }
    }

    /// Whether freed blocks are kept for reuse.
    pub fn caching(&self) -> bool {
        self.caching.load(Ordering::Relaxed)
    }

    /// Gives every cached block back to the system.
    pub fn release_cached(&self) {
        let out = self.lock().drain();
        free_all(&out);
    }

    /// The counts so far.
    pub fn stats(&self) -> BlockCacheStats {
        self.lock().stats()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The bookkeeping is consistent at every unlock: a panic elsewhere
        // while it was held (none can happen inside) leaves it usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_large(&self, size: usize) -> bool {
        size >= self.threshold
    }

    /// A large block: cached if one fits, else from the system.
    unsafe fn alloc_large(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        if self.caching() {
            let hit = self.lock().take(size, align);
            if let Some(addr) = hit {
                let p = addr as *mut u8;
                if zeroed {
                    // SAFETY: the block is `size` bytes, owned by the caller now.
                    unsafe { std::ptr::write_bytes(p, 0, size) };
                }
                return p;
            }
        }
        let out = self.lock().reserve(size);
        free_all(&out);
        // SAFETY: `layout` is the caller's, of non-zero size.
        let p = unsafe {
            if zeroed {
                System.alloc_zeroed(layout)
            } else {
                System.alloc(layout)
            }
        };
        if p.is_null() {
            let mut st = self.lock();
            st.live = st.live.saturating_sub(size);
        }
        p
    }
}

fn free_all(out: &Evicted) {
    for s in out.as_slice() {
        // SAFETY: every cached block came from `System` with this size and
        // alignment, and nothing else refers to it.
        unsafe {
            System.dealloc(
                s.addr as *mut u8,
                Layout::from_size_align_unchecked(s.size, s.align),
            )
        };
    }
}

// SAFETY: every block handed out comes from `System` with the caller's
// layout (a cached block was allocated with exactly that size and
// alignment) and is handed to one caller at a time; a freed block is either
// cached, touched by no one until it is handed out again, or given back to
// `System` with its layout.
unsafe impl GlobalAlloc for BlockCache {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.is_large(layout.size()) {
            // SAFETY: forwarded contract.
            unsafe { self.alloc_large(layout, false) }
        } else {
            // SAFETY: forwarded contract.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.is_large(layout.size()) {
            // SAFETY: forwarded contract.
            unsafe { self.alloc_large(layout, true) }
        } else {
            // SAFETY: forwarded contract.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.is_large(layout.size()) {
            let kept =
                self.lock()
                    .release(ptr as usize, layout.size(), layout.align(), self.caching());
            if kept {
                return;
            }
        }
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (old, large_old, large_new) = (
            layout.size(),
            self.is_large(layout.size()),
            self.is_large(new_size),
        );
        if !large_old && !large_new {
            // SAFETY: forwarded contract.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // The system resizes in place where it can (`mremap`); only the
        // counts change. Growing counts as new live bytes first, so that
        // the bound holds while both sizes may be mapped.
        if large_new {
            let out = self.lock().reserve(new_size);
            free_all(&out);
        }
        // SAFETY: forwarded contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        let mut st = self.lock();
        if p.is_null() {
            // The old block stays live; the new size was never allocated.
            if large_new {
                st.live = st.live.saturating_sub(new_size);
            }
        } else if large_old {
            st.live = st.live.saturating_sub(old);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_freed_block_is_handed_out_again_for_the_same_size_only() {
        let mut st = State::new();
        assert_eq!(st.reserve(100).as_slice(), &[]);
        assert!(st.release(0x1000, 100, 8, true));
        assert_eq!(st.take(100, 16), None, "another alignment");
        assert_eq!(st.take(99, 8), None, "another size");
        assert_eq!(st.take(100, 8), Some(0x1000));
        assert_eq!(st.take(100, 8), None, "handed out once");
        assert_eq!((st.hits, st.misses, st.live, st.cached), (1, 1, 100, 0));
    }

    #[test]
    fn a_request_past_the_high_water_mark_evicts_first() {
        let mut st = State::new();
        st.reserve(300);
        st.reserve(100);
        assert_eq!(st.high_water, 400);
        st.release(0xa, 300, 8, true);
        st.release(0xb, 100, 8, true);
        // 200 more live: 200 + 400 cached > 400, so 200 must go back; the
        // smallest block covering it is the 300 one.
        let out = st.reserve(200);
        assert_eq!(
            out.as_slice().iter().map(|s| s.addr).collect::<Vec<_>>(),
            [0xa]
        );
        assert_eq!((st.live, st.cached, st.high_water), (200, 100, 400));
        // Within the mark nothing goes.
        st.release(0xc, 200, 8, true);
        assert_eq!(st.take(200, 8), Some(0xc));
        // Past it, everything may have to.
        let out = st.reserve(1000);
        assert_eq!(out.as_slice().len(), 1);
        assert_eq!((st.live, st.cached, st.high_water), (1200, 0, 1200));
    }

    #[test]
    fn without_caching_nothing_is_kept() {
        let mut st = State::new();
        st.reserve(50);
        assert!(!st.release(0x1, 50, 8, false));
        assert_eq!((st.live, st.cached), (0, 0));
    }

    #[test]
    fn a_full_cache_gives_the_block_back() {
        let mut st = State::new();
        for _ in 0..=SLOTS {
            st.reserve(10);
        }
        for i in 0..SLOTS {
            assert!(st.release(i + 1, 10, 8, true));
        }
        assert!(!st.release(999, 10, 8, true));
        assert_eq!(st.cached, 10 * SLOTS);
        let out = st.drain();
        assert_eq!(out.as_slice().len(), SLOTS);
        assert_eq!(st.cached, 0);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Alloc(usize),
        Free(usize),
    }

    proptest! {
        /// Over any sequence of requests and frees: live plus cached never
        /// exceeds the most ever live, the counts match the slots, and a
        /// block is never both live and cached.
        #[test]
        fn the_bound_holds_for_any_sequence(
            steps in proptest::collection::vec(
                prop_oneof![
                    (1usize..6).prop_map(|s| Step::Alloc(s * 100)),
                    (0usize..40).prop_map(Step::Free),
                ],
                1..200,
            )
        ) {
            let mut st = State::new();
            let mut live: Vec<(usize, usize)> = Vec::new();
            let mut next_addr = 1usize;
            let mut most_live = 0usize;
            for step in steps {
                match step {
                    Step::Alloc(size) => {
                        let addr = match st.take(size, 8) {
                            Some(a) => a,
                            None => {
                                st.reserve(size);
                                next_addr += 1;
                                next_addr
                            }
                        };
                        prop_assert!(live.iter().all(|&(a, _)| a != addr));
                        live.push((addr, size));
                    }
                    Step::Free(i) if !live.is_empty() => {
                        let (addr, size) = live.swap_remove(i % live.len());
                        st.release(addr, size, 8, true);
                    }
                    Step::Free(_) => {}
                }
                let live_bytes: usize = live.iter().map(|&(_, s)| s).sum();
                most_live = most_live.max(live_bytes);
                let cached: usize = st.slots.iter().map(|s| s.size).sum();
                prop_assert_eq!(st.live, live_bytes);
                prop_assert_eq!(st.cached, cached);
                prop_assert_eq!(st.high_water, most_live);
                prop_assert!(st.live + st.cached <= most_live);
                for s in st.slots.iter().filter(|s| s.size > 0) {
                    prop_assert!(live.iter().all(|&(a, _)| a != s.addr));
                }
            }
        }
    }
}
