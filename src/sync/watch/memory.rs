//! The watch's heap: glibc's malloc tuned at start and trimmed after
//! activity, so that a process that lives for days through bursts idles
//! near its working set, not at its peak. Its own file because it is
//! about the process, not about federation.

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
