//! The CPU time each process of a run used: the service, its PostgreSQL server, the node
//! and the bench's own clients; and the service's resident memory.

use std::time::Duration;

/// The processes whose CPU time a run accounts for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    pub(crate) walletops: Option<u32>,
    pub(crate) anvil: Option<u32>,
    /// This process: the clients' side of every run.
    pub(crate) client: Option<u32>,
    /// Whether the service's store is the PostgreSQL server on this machine, whose
    /// processes' CPU counts as the store's.
    pub(crate) postgres: bool,
}

/// CPU time (user plus system) used during a run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuUse {
    pub(crate) walletops: Option<Duration>,
    /// Of the service's, the part spent in the kernel (system time: sockets, the database's
    /// file writes and syncs, waking threads).
    pub(crate) walletops_kernel: Option<Duration>,
    /// The PostgreSQL server's processes (backends, WAL writer, checkpointer).
    pub(crate) store: Option<Duration>,
    pub(crate) anvil: Option<Duration>,
    pub(crate) client: Option<Duration>,
}

/// CPU time of `stat`.
fn ticks(stat: &procfs::process::Stat) -> Duration {
    Duration::from_secs_f64((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

/// CPU time process `pid` has used so far (Linux `/proc`; `None` elsewhere).
fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    Some(ticks(&stat_of(pid)?))
}

/// The part of it spent in the kernel.
fn kernel_time(pid: Option<u32>) -> Option<Duration> {
    let stat = stat_of(pid)?;
    Some(Duration::from_secs_f64(
        stat.stime as f64 / procfs::ticks_per_second() as f64,
    ))
}

fn stat_of(pid: Option<u32>) -> Option<procfs::process::Stat> {
    procfs::process::Process::new(i32::try_from(pid?).ok()?)
        .ok()?
        .stat()
        .ok()
}

/// CPU time every process named `postgres` on this machine has used so far, by pid: a
/// backend that ends during a run is counted up to its last reading.
fn postgres_times() -> std::collections::HashMap<i32, Duration> {
    procfs::process::all_processes()
        .into_iter()
        .flatten()
        .filter_map(|p| p.ok()?.stat().ok())
        .filter(|s| s.comm == "postgres")
        .map(|s| (s.pid, ticks(&s)))
        .collect()
}

/// Resident memory of process `pid`, in MB: all of it, and the private (anonymous) part;
/// the rest are pages of files mapped (the binary's code, the SQLite database's map), shared
/// and given back whenever the kernel needs them (Linux `/proc`).
pub(crate) fn rss_mb(pid: Option<u32>) -> Option<(f64, f64)> {
    let status = procfs::process::Process::new(i32::try_from(pid?).ok()?)
        .ok()?
        .status()
        .ok()?;
    Some((
        status.vmrss? as f64 / 1024.0,
        status.rssanon? as f64 / 1024.0,
    ))
}

impl Probe {
    /// Runs `work` and returns its result with the CPU time each process used meanwhile.
    pub(crate) async fn measure<T>(self, work: impl Future<Output = T>) -> (T, CpuUse) {
        let now = || {
            (
                cpu_time(self.walletops),
                cpu_time(self.anvil),
                cpu_time(self.client),
                kernel_time(self.walletops),
            )
        };
        let store_before = self.postgres.then(postgres_times);
        let before = now();
        let out = work.await;
        let after = now();
        let store_after = self.postgres.then(postgres_times);
        let used = |b: Option<Duration>, a: Option<Duration>| Some(a?.saturating_sub(b?));
        let store = match (store_before, store_after) {
            (Some(before), Some(after)) => Some(
                after
                    .iter()
                    .map(|(pid, a)| a.saturating_sub(before.get(pid).copied().unwrap_or_default()))
                    .sum(),
            ),
            _ => None,
        };
        let cpu = CpuUse {
            walletops: used(before.0, after.0),
            walletops_kernel: used(before.3, after.3),
            store,
            anvil: used(before.1, after.1),
            client: used(before.2, after.2),
        };
        (out, cpu)
    }
}
