//! A parallel loop in which the calling thread takes part.
//!
//! `rayon`'s parallel iterators, called from a thread outside the pool (the
//! usual case: a training loop on the main thread), inject the whole loop
//! into the pool and put the caller to sleep until a worker finishes it. For
//! kernels of tens of microseconds (SpMM on Cora's operator) the two
//! cross-thread wake-ups that costs are a large part of the call.
//! [`for_each_chunk`] instead starts `threads - 1` helper jobs and lets the
//! caller work at once; all of them take chunks from one shared queue, so a
//! helper that wakes late simply takes fewer chunks.

use std::sync::Mutex;

/// Calls `f(i, chunk)` for every chunk `i` of `data.chunks_mut(chunk_len)`,
/// spread over the calling thread and up to `rayon::current_num_threads() - 1`
/// pool workers. Returns when every chunk is done. `chunk_len` must be positive.
pub(crate) fn for_each_chunk<T: Send, F>(data: &mut [T], chunk_len: usize, f: F)
where
    F: Fn(usize, &mut [T]) + Sync,
{
    let chunks = data.len().div_ceil(chunk_len.max(1));
    let helpers = rayon::current_num_threads().min(chunks).saturating_sub(1);
    if helpers == 0 {
        for (i, c) in data.chunks_mut(chunk_len.max(1)).enumerate() {
            f(i, c);
        }
        return;
    }
    let queue = Mutex::new(data.chunks_mut(chunk_len).enumerate());
    let work = || {
        loop {
            // A poisoned lock means another thread panicked in `f`; the
            // scope re-raises that panic, so just stop taking work.
            let next = match queue.lock() {
                Ok(mut q) => q.next(),
                Err(_) => None,
            };
            match next {
                Some((i, c)) => f(i, c),
                None => break,
            }
        }
    };
    rayon::in_place_scope(|s| {
        for _ in 0..helpers {
            s.spawn(|_| work());
        }
        work();
    });
}

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
}
