//! The watch's heap: glibc's malloc tuned at start and trimmed after
//! activity, so that a process that lives for days through bursts idles
//! near its working set, not at its peak. Its own file because it is
//! about the process, not about federation.
//!
//! The binary's Rust heap is mimalloc's (`src/main.rs`), which purges
//! freed pages by itself: glibc's malloc, tuned here, serves only what C
//! code allocates (and the library's own tests and benches). With glibc
//! for everything, an idle watch at 10,000 × 10 held 91 MiB of heap in use
//! and 101 MiB freed that `malloc_trim` could not give back
//! (docs/performance/memory.md, *The watch's idle memory*).

/// glibc's malloc tuned for a process that lives for days through bursts:
/// two arenas, not eight per core (rounds run on every worker thread and on
/// short-lived threads, and each arena keeps what was freed in it), and a
/// fixed mmap threshold of 128 KiB (by default it rises to the largest
/// block freed, up to 32 MiB, after which a round's big buffers come from
/// the arenas and pin their pages between the cache's live blocks, where
/// `malloc_trim` cannot give them back).
pub(super) fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt has no preconditions; it sets allocator tunables.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Hands freed heap back to the system (every probe interval, after
/// activity). A full round copies every cached object, and events queue up
/// while a round runs; glibc's malloc keeps what was freed in its arenas,
/// so without this a watcher would idle at its peak.
pub(super) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only returns free pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Gives back the table of a map that grew in a burst and is now mostly
/// empty: a `HashMap` keeps its largest table. The watch's own writes in
/// flight (`Cache::hold_own_write`) number tens of thousands in a first
/// sync at 10,000 × 10 and a handful at idle.
pub(super) fn shrink_when_sparse<K: Eq + std::hash::Hash, V>(
    map: &mut std::collections::HashMap<K, V>,
) {
    if map.capacity() > 1024 && map.len() < map.capacity() / 8 {
        map.shrink_to(map.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_map_mostly_emptied_gives_its_table_back_and_a_small_one_keeps_it() {
        let mut m: HashMap<u32, u64> = (0..50_000).map(|i| (i, 0)).collect();
        m.retain(|k, _| *k < 10);
        shrink_when_sparse(&mut m);
        assert!(m.capacity() < 100, "{} slots for 10 entries", m.capacity());
        assert_eq!(m.len(), 10);
        let mut small: HashMap<u32, u64> = (0..500).map(|i| (i, 0)).collect();
        let cap = small.capacity();
        small.clear();
        shrink_when_sparse(&mut small);
        assert_eq!(small.capacity(), cap, "a small table is not worth it");
    }
}
