//! Waiting on a condition: everything the tests wait for is polled, or awaited, under one
//! timeout, and a wait that runs out says what it waited for.

use std::time::Duration;

use anyhow::{Context, bail};

/// How long anything the tests wait for may take before the test fails saying what it
/// waited for.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long between polls of a condition.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// Polls `check` until it yields a value; fails after `WAIT_TIMEOUT` naming `what`.
pub async fn poll_until<T, F, Fut>(what: &str, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    poll_until_within(what, WAIT_TIMEOUT, check).await
}

/// `poll_until` for work that is long by its nature (a thousand payments, say): fails
/// after `timeout`.
pub async fn poll_until_within<T, F, Fut>(
    what: &str,
    timeout: Duration,
    mut check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Awaits `work`; fails after `WAIT_TIMEOUT` naming `what`.
pub async fn within<T>(what: &str, work: impl Future<Output = T>) -> anyhow::Result<T> {
    tokio::time::timeout(WAIT_TIMEOUT, work)
        .await
        .with_context(|| format!("timed out after {WAIT_TIMEOUT:?} waiting for {what}"))
}
