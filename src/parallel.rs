//! Work spread over the machine's cores with scoped threads: results come
//! back in input order, so callers stay deterministic (same output, same
//! first error) whatever the number of cores.

/// A mutex's guard, also when a holder panicked: what is shared this way
/// (counters, the watch's metrics, the Events correlator) stays consistent
/// whatever its last holder did, so one panic must not make every later
/// reader panic too.
pub fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How many threads a parallel step uses.
pub fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `items.iter().map(f).collect()` on all cores.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    map_owned(items.iter().collect(), f)
}

/// `items.into_iter().map(f).collect()`, with `items` cut into one
/// contiguous run per core (the calling thread takes the first run). Items
/// are consumed, and so dropped, on the threads.
pub fn map_owned<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let runs = workers().min(items.len());
    if runs <= 1 {
        return items.into_iter().map(f).collect();
    }
    let size = items.len().div_ceil(runs);
    let mut rest = items;
    let mut chunks = Vec::with_capacity(runs);
    while rest.len() > size {
        let tail = rest.split_off(size);
        chunks.push(std::mem::replace(&mut rest, tail));
    }
    chunks.push(rest);
    let f = &f;
    std::thread::scope(|scope| {
        let mut chunks = chunks.into_iter();
        let first = chunks.next().expect("at least one run");
        let others: Vec<_> = chunks
            .map(|run| scope.spawn(move || run.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        let mut out: Vec<R> = first.into_iter().map(f).collect();
        for handle in others {
            match handle.join() {
                Ok(results) => out.extend(results),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

/// Drops `value` on a thread of its own. Freeing what a run observed and
/// decided (hundreds of thousands of JSON nodes for a few thousand objects)
/// takes a noticeable part of a no-op run; nothing needs to wait for it,
/// and a process that exits first leaves it to the operating system.
pub fn drop_in_background<T: Send + 'static>(value: T) {
    // If no thread can be started, the value is dropped here instead.
    let _ = std::thread::Builder::new()
        .name("drop".into())
        .spawn(move || drop(value));
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_input_order() {
        let items: Vec<u32> = (0..1001).collect();
        let doubled: Vec<u32> = (0..1001).map(|i| i * 2).collect();
        assert_eq!(super::map(&items, |i| i * 2), doubled);
        assert_eq!(super::map_owned(items, |i| i * 2), doubled);
        assert_eq!(super::map(&[] as &[u32], |i| *i), Vec::<u32>::new());
        assert_eq!(super::map_owned(vec![7], |i| i + 1), [8]);
    }

    #[test]
    fn drops_in_background() {
        struct Signal(std::sync::mpsc::Sender<std::thread::ThreadId>);
        impl Drop for Signal {
            fn drop(&mut self) {
                let _ = self.0.send(std::thread::current().id());
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        super::drop_in_background(Signal(tx));
        let dropped_on = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the value is dropped");
        assert_ne!(dropped_on, std::thread::current().id());
    }
}
