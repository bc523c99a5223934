//! What a soak showed of one store, the lines it prints with each goal's verdict, and its
//! figures as JSON.

use serde_json::{Value, json};

use super::SEND_WALLETS;
use crate::report::{ChainView, verdict};

/// Resident memory growth after the first sixth of the run (5 minutes of 30), in percent.
const GROWTH_GOAL_PERCENT: f64 = 10.0;

/// What the soak of one store showed.
#[derive(Debug)]
pub(crate) struct Figures {
    pub(super) store: &'static str,
    pub(super) minutes: f64,
    pub(super) sends: usize,
    pub(super) swaps: u64,
    pub(super) cached_reads: u64,
    pub(super) fresh_reads: u64,
    pub(super) errors: u64,
    pub(super) first_errors: Vec<String>,
    /// Resident memory, in MB, at each reading: (seconds into the load, MB).
    pub(super) rss: Vec<(u64, f64)>,
    /// Records still open when the settling time ran out, and records final but not
    /// confirmed.
    pub(super) not_final: usize,
    pub(super) not_confirmed: usize,
    pub(super) chain: ChainView,
    pub(super) webhooks: usize,
    pub(super) webhooks_missing: usize,
    pub(super) events: usize,
    pub(super) events_missing: usize,
    pub(super) events_out_of_order: usize,
}

impl Figures {
    /// Resident memory at the start, after the first sixth of the run, and at the end.
    fn memory(&self) -> (f64, f64, f64) {
        let sixth = (self.minutes * 10.0) as u64;
        let start = self.rss.first().map_or(0.0, |r| r.1);
        let base = self
            .rss
            .iter()
            .find(|r| r.0 >= sixth)
            .map_or(start, |r| r.1);
        let end = self.rss.last().map_or(0.0, |r| r.1);
        (start, base, end)
    }

    fn growth_percent(&self) -> f64 {
        let (_, base, end) = self.memory();
        100.0 * (end - base) / base.max(f64::MIN_POSITIVE)
    }

    /// Whether the chain shows a correctness failure.
    pub(crate) fn failed(&self) -> bool {
        self.chain.failed()
    }

    pub(crate) fn print(&self) {
        let s = self.store;
        let (start, base, end) = self.memory();
        let growth = self.growth_percent();
        let lost = self.webhooks_missing + self.events_missing + self.events_out_of_order;
        println!(
            "soak {s}, {:.1} min: {} sends over {SEND_WALLETS} wallets, {} swaps, {} cached and {} fresh reads; {} webhooks delivered, {} events watched",
            self.minutes,
            self.sends,
            self.swaps,
            self.cached_reads,
            self.fresh_reads,
            self.webhooks,
            self.events
        );
        println!(
            "soak {s}: resident memory {start:.1} MB at the start, {base:.1} MB after {:.1} min, {end:.1} MB at the end: {growth:+.1} % after the first sixth (goal ≤ {GROWTH_GOAL_PERCENT:.0} %: {})",
            self.minutes / 6.0,
            verdict(growth <= GROWTH_GOAL_PERCENT)
        );
        println!(
            "soak {s}: {} errors (goal 0: {})",
            self.errors,
            verdict(self.errors == 0)
        );
        for e in &self.first_errors {
            println!("    {e}");
        }
        println!(
            "soak {s}: {} records not final, {} final but not confirmed (goal 0: {})",
            self.not_final,
            self.not_confirmed,
            verdict(self.not_final + self.not_confirmed == 0)
        );
        println!(
            "soak {s}: {} nonce gaps, {} duplicates, {} missing on chain ({} mined as the monitor's replacement) (goal 0: {})",
            self.chain.gaps,
            self.chain.duplicates,
            self.chain.missing,
            self.chain.replaced,
            verdict(!self.chain.failed())
        );
        println!(
            "soak {s}: {} confirmations not delivered, {} not watched, {} events out of order (goal 0: {})",
            self.webhooks_missing,
            self.events_missing,
            self.events_out_of_order,
            verdict(lost == 0)
        );
    }

    pub(crate) fn json(&self) -> Value {
        let (start, base, end) = self.memory();
        json!({
            "store": self.store,
            "minutes": self.minutes,
            "sends": self.sends,
            "swaps": self.swaps,
            "cached_reads": self.cached_reads,
            "fresh_reads": self.fresh_reads,
            "errors": self.errors,
            "first_errors": self.first_errors,
            "rss_mb": {"start": start, "after_first_sixth": base, "end": end,
                       "growth_percent": self.growth_percent(), "goal_percent": GROWTH_GOAL_PERCENT,
                       "readings": self.rss},
            "records_not_final": self.not_final,
            "records_not_confirmed": self.not_confirmed,
            "nonce_gaps": self.chain.gaps,
            "duplicates": self.chain.duplicates,
            "missing_on_chain": self.chain.missing,
            "replaced": self.chain.replaced,
            "webhooks_delivered": self.webhooks,
            "webhooks_missing": self.webhooks_missing,
            "events_watched": self.events,
            "events_missing": self.events_missing,
            "events_out_of_order": self.events_out_of_order,
        })
    }
}
