//! The `process_*` series Prometheus' Go client serves for every process
//! (KubeFed's controller-manager included), read from Linux's `/proc` as
//! that client reads them, so that a dashboard of CPU, memory and file
//! descriptors works on the watch unchanged.

/// One reading of this process.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub start_time_seconds: f64,
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    pub open_fds: u64,
    /// Soft limits; unlimited is `u64::MAX`, as the Go client reads it.
    pub max_fds: u64,
    pub virtual_memory_max_bytes: u64,
}

/// This process now; `None` where `/proc` is not there (not Linux).
pub fn read() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    // SAFETY: sysconf has no preconditions.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100);
    let page = u64::try_from(page).ok().filter(|p| *p > 0).unwrap_or(4096);
    let s = parse_stat(&stat)?;
    Some(ProcessStats {
        cpu_seconds: (s.utime + s.stime) as f64 / ticks as f64,
        start_time_seconds: boot_time(&boot)? as f64 + s.starttime as f64 / ticks as f64,
        resident_memory_bytes: s.rss_pages * page,
        virtual_memory_bytes: s.vsize,
        open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as u64,
        max_fds: soft_limit(&limits, "Max open files")?,
        virtual_memory_max_bytes: soft_limit(&limits, "Max address space")?,
    })
}

/// What `/proc/<pid>/stat` says of CPU, start and memory.
#[derive(Debug, PartialEq)]
pub struct Stat {
    pub utime: u64,
    pub stime: u64,
    pub starttime: u64,
    pub vsize: u64,
    pub rss_pages: u64,
}

/// `/proc/<pid>/stat`: fields after the command name, which is in
/// parentheses and may hold spaces and parentheses itself.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let after = &text[text.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name.
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        starttime: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// `btime` of `/proc/stat`: boot time in seconds since the epoch.
pub fn boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A soft limit of `/proc/<pid>/limits`; unlimited is `u64::MAX`.
pub fn soft_limit(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let soft = line[name.len()..].split_whitespace().next()?;
    match soft {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_past_a_name_with_spaces_and_parentheses() {
        let text = "4242 (tokio (rt) 1) S 1 4242 4242 0 -1 4194560 500 0 0 0 \
                    250 75 0 0 20 0 9 0 123456 104857600 2560 18446744073709551615 1 1 0 0 0";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                utime: 250,
                stime: 75,
                starttime: 123456,
                vsize: 104857600,
                rss_pages: 2560,
            })
        );
        assert_eq!(parse_stat("12 (cut short) S 1 2"), None);
    }

    #[test]
    fn boot_time_and_limits() {
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1764720000\nprocesses 9\n"),
            Some(1764720000)
        );
        assert_eq!(boot_time("cpu 1\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n\
                      Max address space         unlimited            unlimited            bytes     \n";
        assert_eq!(soft_limit(limits, "Max open files"), Some(1024));
        assert_eq!(soft_limit(limits, "Max address space"), Some(u64::MAX));
        assert_eq!(soft_limit(limits, "Max locked memory"), None);
    }

    #[test]
    fn this_process_reads_as_itself() {
        let p = read().expect("Linux");
        assert!(p.open_fds >= 3, "{p:?}");
        assert!(p.resident_memory_bytes > 0 && p.virtual_memory_bytes >= p.resident_memory_bytes);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 86400.0 * 365.0);
    }
}
