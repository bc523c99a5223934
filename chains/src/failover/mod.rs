//! Failover over a chain's RPC URLs (`rpc_urls`), the rule both chain families' transports
//! follow: calls go to the URLs in the order configured, a URL that fails is passed over for
//! the next, and one that failed `FAILURES_TO_SKIP` times running (or answered 429) is
//! skipped for a while, then tried again. While every URL is skipped, all are tried, in
//! order: a node that may have recovered is better than no answer. Broadcasts go to every
//! URL at once (see the transports).

pub(crate) mod evm;
pub(crate) mod solana;

use std::{
    future::Future,
    sync::Mutex,
    time::{Duration, Instant},
};

/// Failures in a row after which a URL is skipped.
const FAILURES_TO_SKIP: u32 = 3;

/// How long a failing URL is skipped.
const SKIP_FOR: Duration = Duration::from_secs(30);

/// The longest a 429's `Retry-After` keeps a URL skipped.
const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How long one call may take on a URL while another remains to be tried: a node that stalls
/// does not hold a request past what its deadline leaves for the next one.
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// What one URL's calls have shown lately.
#[derive(Debug, Default)]
struct Health {
    failures_in_a_row: u32,
    skipped_until: Option<Instant>,
}

/// The health of each of a chain's URLs, in their configured order.
#[derive(Debug)]
pub(crate) struct Nodes {
    urls: Vec<String>,
    health: Vec<Mutex<Health>>,
}

impl Nodes {
    pub(crate) fn new(urls: &[String]) -> Self {
        Self {
            urls: urls.to_vec(),
            health: urls.iter().map(|_| Mutex::default()).collect(),
        }
    }

    fn health(&self, node: usize) -> std::sync::MutexGuard<'_, Health> {
        self.health[node]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The URLs' indexes in the order to try them: those not skipped, in the configured
    /// order; all of them when every one is skipped.
    pub(crate) fn order(&self) -> Vec<usize> {
        let now = Instant::now();
        let up: Vec<usize> = (0..self.urls.len())
            .filter(|&i| {
                self.health(i)
                    .skipped_until
                    .is_none_or(|until| until <= now)
            })
            .collect();
        if up.is_empty() {
            (0..self.urls.len()).collect()
        } else {
            up
        }
    }

    /// How many URLs there are.
    pub(crate) fn len(&self) -> usize {
        self.urls.len()
    }

    /// The URL at `node`, for logs.
    pub(crate) fn url(&self, node: usize) -> &str {
        &self.urls[node]
    }

    /// A call to `node` was answered.
    pub(crate) fn succeeded(&self, node: usize) {
        *self.health(node) = Health::default();
    }

    /// A call to `node` failed; `retry_after` when it asked to be left alone for a while
    /// (a 429).
    pub(crate) fn failed(&self, node: usize, retry_after: Option<Duration>) {
        let mut health = self.health(node);
        health.failures_in_a_row += 1;
        let skip = match retry_after {
            Some(wait) => Some(wait.clamp(Duration::from_secs(1), LONGEST_RETRY_AFTER)),
            None if health.failures_in_a_row >= FAILURES_TO_SKIP => Some(SKIP_FOR),
            None => None,
        };
        if let Some(skip) = skip {
            if health
                .skipped_until
                .is_none_or(|until| until <= Instant::now())
            {
                tracing::warn!(
                    url = %redacted(&self.urls[node]),
                    skip_secs = skip.as_secs(),
                    "an RPC URL keeps failing; skipping it for a while"
                );
            }
            health.skipped_until = Some(Instant::now() + skip);
        }
    }

    /// Tries `attempt` (given a URL's index and how long it may take) on each URL in
    /// `order` until one gives an outcome that is `answered`, within `timeout` overall; that
    /// outcome, else the last one (`None` without URLs).
    pub(crate) async fn in_order<T, E, Fut>(
        &self,
        timeout: Duration,
        attempt: impl Fn(usize, Duration) -> Fut,
        answered: impl Fn(&Result<T, E>) -> bool,
    ) -> Option<Result<T, E>>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        let deadline = Instant::now() + timeout;
        let order = self.order();
        let mut last = None;
        for (position, &node) in order.iter().enumerate() {
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = attempt(node, Self::attempt_timeout(&order, position, left)).await;
            if answered(&outcome) {
                return Some(outcome);
            }
            last = Some(outcome);
        }
        last
    }

    /// Runs `attempt` on every URL at once, each in a task of its own that finishes even
    /// once this has returned (every node gets a broadcast). The first outcome that is
    /// `accepted`; else every outcome, in the configured order.
    pub(crate) async fn to_all<T, E, Fut>(
        &self,
        attempt: impl Fn(usize) -> Fut,
        accepted: impl Fn(&Result<T, E>) -> bool,
    ) -> Result<Result<T, E>, Vec<Result<T, E>>>
    where
        T: Send + 'static,
        E: Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let (tx, mut rx) = tokio::sync::mpsc::channel(self.len());
        for node in 0..self.len() {
            let (sent, tx) = (attempt(node), tx.clone());
            tokio::spawn(async move {
                let _ = tx.send((node, sent.await)).await;
            });
        }
        drop(tx);
        let mut outcomes = Vec::new();
        while let Some((node, outcome)) = rx.recv().await {
            if accepted(&outcome) {
                return Ok(outcome);
            }
            outcomes.push((node, outcome));
        }
        outcomes.sort_by_key(|(node, _)| *node);
        Err(outcomes.into_iter().map(|(_, outcome)| outcome).collect())
    }

    /// How long the call at `position` of `order` may take, `left` being what remains of
    /// the whole call's time: `ATTEMPT_TIMEOUT` at most while other URLs remain after it.
    pub(crate) fn attempt_timeout(order: &[usize], position: usize, left: Duration) -> Duration {
        if position + 1 < order.len() {
            ATTEMPT_TIMEOUT.min(left)
        } else {
            left
        }
    }
}

/// `url` without its path and query, which often hold a provider's API key.
pub(crate) fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => {
            format!(
                "{}://{}",
                parsed.scheme(),
                parsed.host_str().unwrap_or_default()
            ) + &parsed.port().map(|p| format!(":{p}")).unwrap_or_default()
        }
        Err(_) => "<unparsable URL>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Nodes {
        Nodes::new(&["http://a".to_owned(), "http://b".to_owned()])
    }

    #[test]
    fn a_url_failing_in_a_row_is_skipped_then_tried_again() {
        let n = nodes();
        n.failed(0, None);
        n.failed(0, None);
        assert_eq!(n.order(), vec![0, 1], "two failures do not skip it");
        n.failed(0, None);
        assert_eq!(n.order(), vec![1]);
        n.health(0).skipped_until = Some(Instant::now());
        assert_eq!(n.order(), vec![0, 1], "tried again once the skip ran out");
        n.succeeded(0);
        n.failed(0, None);
        assert_eq!(n.order(), vec![0, 1], "a success starts the count again");
    }

    #[test]
    fn a_429_skips_at_once_and_all_skipped_means_all_tried() {
        let n = nodes();
        n.failed(1, Some(Duration::from_secs(2)));
        assert_eq!(n.order(), vec![0]);
        for _ in 0..FAILURES_TO_SKIP {
            n.failed(0, None);
        }
        assert_eq!(n.order(), vec![0, 1]);
    }

    #[test]
    fn only_the_last_url_gets_the_full_timeout() {
        let full = Duration::from_secs(15);
        assert_eq!(Nodes::attempt_timeout(&[0, 1], 0, full), ATTEMPT_TIMEOUT);
        assert_eq!(Nodes::attempt_timeout(&[0, 1], 1, full), full);
        assert_eq!(Nodes::attempt_timeout(&[1], 0, full), full);
    }

    #[test]
    fn logs_never_show_a_urls_path() {
        assert_eq!(
            redacted("https://eth.example.com:8443/v2/SECRETKEY?x=1"),
            "https://eth.example.com:8443"
        );
    }
}
