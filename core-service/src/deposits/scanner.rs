//! The deposit scanner every core runs: one loop per chain whose `deposits` switch is on,
//! each poll taking (or keeping) the chain's lease, so that of several cores one scans each
//! chain, then one step of its family's scan (`evm`, `solana`).

use std::{future::Future, sync::Arc, time::Duration};

use uuid::Uuid;

use super::{evm, solana};
use crate::{error::WalletOpsError, runner::Pace};
use walletops_chains::{Chain, Registry, evm::EvmClients, solana::SolanaClients};
use walletops_domain::ChainFamily;
use walletops_store::Store;

/// How long a chain's lease lasts unless renewed: a core that dies leaves its chains to the
/// others after this.
const LEASE: Duration = Duration::from_secs(30);

/// What a scan step needs.
#[derive(Debug, Clone)]
pub(super) struct Scan {
    pub(super) store: Store,
    pub(super) owner: Uuid,
    pub(super) evm: Arc<EvmClients>,
    pub(super) solana: Arc<SolanaClients>,
    /// Whether each EVM chain's node serves `trace_block`, once asked.
    pub(super) traced: Arc<std::sync::Mutex<std::collections::HashMap<String, bool>>>,
}

/// The scanner of every chain that has deposits on.
#[derive(Debug)]
pub struct Scanner {
    scan: Scan,
    chains: Arc<Registry>,
}

impl Scanner {
    /// A scanner of `chains`' deposit-scanned chains.
    pub fn new(
        store: Store,
        chains: Arc<Registry>,
        evm: Arc<EvmClients>,
        solana: Arc<SolanaClients>,
    ) -> Self {
        Self {
            scan: Scan {
                store,
                owner: Uuid::now_v7(),
                evm,
                solana,
                traced: Arc::default(),
            },
            chains,
        }
    }

    /// Scans until `stop` completes, then gives up its leases.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let mut loops = tokio::task::JoinSet::new();
        for chain in self.chains.all().filter(|c| c.deposits().is_some()) {
            loops.spawn(scan_chain(self.scan.clone(), chain.clone()));
        }
        // Even with nothing to scan it runs until told to stop, as every task of a core does.
        stop.await;
        loops.shutdown().await;
        if let Err(e) = self.scan.store.release_deposit_scans(self.scan.owner).await {
            tracing::warn!(error = %e, "giving up the deposit scan leases failed");
        }
    }
}

/// Scans `chain` every poll interval, while this core holds its lease.
async fn scan_chain(scan: Scan, chain: Chain) {
    let every = chain.deposits().map_or(Duration::from_secs(2), |d| {
        Duration::from_millis(d.poll_interval_ms)
    });
    // Stopped by the scanner's shutdown of its tasks.
    let stop = std::future::pending();
    let round = || scan_step(&scan, &chain);
    let name = format!("deposit scan of {}", chain.slug());
    crate::runner::run(&name, Pace::After(every), stop, round, crate::runner::never).await;
}

/// One step of `chain`'s scan, if this core holds its lease.
async fn scan_step(scan: &Scan, chain: &Chain) -> Result<(), WalletOpsError> {
    let now = crate::clock::now();
    let until = now + chrono::TimeDelta::from_std(LEASE).unwrap_or(chrono::TimeDelta::MAX);
    let Some(cursor) = scan
        .store
        .lease_deposit_scan(chain.slug(), scan.owner, now, until)
        .await?
    else {
        return Ok(());
    };
    match chain.family() {
        ChainFamily::Evm => evm::step(scan, chain, cursor).await,
        ChainFamily::Solana => solana::step(scan, chain).await,
    }
}
