//! Driving a run: `n` calls on a number of concurrent clients, timed from the first call to
//! the last answer.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::bail;

/// Runs `op(0..n)` on `concurrency` clients that each take the next index as soon as their
/// previous call answered; returns the time from the first call to the last answer and the
/// results in index order. Every call is timed, failed or not.
pub(crate) async fn drive<T, F, Fut>(
    n: u64,
    concurrency: usize,
    op: F,
) -> anyhow::Result<(Duration, Vec<anyhow::Result<T>>)>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send,
{
    let n = usize::try_from(n)?;
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    // Separate tasks, not one polled stream, so both runtime threads issue requests.
    let workers: Vec<_> = (0..concurrency.min(n))
        .map(|_| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let result = op(i).await;
                    done.push((i, result, Instant::now()));
                }
                done
            })
        })
        .collect();
    let mut results: Vec<Option<anyhow::Result<T>>> = (0..n).map(|_| None).collect();
    let mut last = start;
    for worker in workers {
        for (i, result, at) in worker.await? {
            last = last.max(at);
            results[i] = Some(result);
        }
    }
    let results = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow::anyhow!("never sent"))))
        .collect();
    Ok((last - start, results))
}

/// The values of `results`, or an error naming how many failed and the first few causes.
pub(crate) fn all_ok<T>(results: Vec<anyhow::Result<T>>, what: &str) -> anyhow::Result<Vec<T>> {
    let total = results.len();
    let mut values = Vec::with_capacity(total);
    let mut errors = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => values.push(v),
            Err(e) => errors.push(format!("#{i}: {e:#}")),
        }
    }
    if !errors.is_empty() {
        bail!(
            "{} of {total} {what} failed; first: {}",
            errors.len(),
            errors
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    Ok(values)
}
