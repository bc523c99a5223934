//! The CPU time each process of a throughput run used: the service, the node and the
//! bench's own clients.

use std::time::Duration;

/// The processes whose CPU time a throughput run accounts for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    pub(crate) walletops: Option<u32>,
    pub(crate) anvil: Option<u32>,
    /// This process: the clients' side of every run.
    pub(crate) client: Option<u32>,
}

/// CPU time (user plus system) used during a throughput run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuUse {
    pub(crate) walletops: Option<Duration>,
    pub(crate) anvil: Option<Duration>,
    pub(crate) client: Option<Duration>,
}

/// CPU time process `pid` has used so far (Linux `/proc`; `None` elsewhere).
fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let stat = procfs::process::Process::new(i32::try_from(pid?).ok()?)
        .ok()?
        .stat()
        .ok()?;
    let ticks = stat.utime + stat.stime;
    Some(Duration::from_secs_f64(
        ticks as f64 / procfs::ticks_per_second() as f64,
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
            )
        };
        let before = now();
        let out = work.await;
        let after = now();
        let used = |b: Option<Duration>, a: Option<Duration>| Some(a?.saturating_sub(b?));
        let cpu = CpuUse {
            walletops: used(before.0, after.0),
            anvil: used(before.1, after.1),
            client: used(before.2, after.2),
        };
        (out, cpu)
    }
}
