//! Waiting for a cluster to catch up (a CRD established, a token filled, a
//! new type served): one bounded poll loop for every command.

use anyhow::Result;
use std::future::Future;
use std::time::{Duration, Instant};

/// Calls `check` until it gives `Some`, at most until `timeout` has
/// passed, pausing `every` between calls (the first call is immediate).
/// `Ok(None)` means time ran out; an error of `check` ends the wait.
pub async fn poll_until<T, F, Fut>(
    timeout: Duration,
    every: Duration,
    mut check: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(done) = check().await? {
            return Ok(Some(done));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(every.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test]
    async fn waits_until_ready_or_gives_up() {
        let calls = Cell::new(0);
        let ready = poll_until(Duration::from_secs(5), Duration::from_millis(1), || async {
            calls.set(calls.get() + 1);
            Ok((calls.get() == 3).then_some("ready"))
        })
        .await
        .unwrap();
        assert_eq!((ready, calls.get()), (Some("ready"), 3));
        let never = poll_until(
            Duration::from_millis(20),
            Duration::from_millis(5),
            || async { Ok(None::<()>) },
        )
        .await
        .unwrap();
        assert_eq!(never, None);
        let failed = poll_until(Duration::from_secs(5), Duration::from_millis(1), || async {
            anyhow::bail!("refused") as Result<Option<()>>
        })
        .await;
        assert_eq!(failed.unwrap_err().to_string(), "refused");
    }
}
