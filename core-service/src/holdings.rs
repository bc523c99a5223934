//! What a user's wallets hold: each wallet's native balance on the chains of its family
//! that are in the config file or carry the user's transactions (every chain of the family
//! when asked), read through the balance cache, for the dashboard's wallets page.
//!
//! A built-in public chain nobody here uses is not read by default: its public node may be
//! down or rate-limited, and every failed read would count towards `WalletOpsRpcFailing`
//! for a chain the operator never chose.

use futures::future::join_all;
use uuid::Uuid;

use crate::{
    balances::{Balance, Balances},
    error::Result,
    transactions::Transactions,
    wallets::Wallets,
};

use walletops_chains::{Chain, Registry};
use walletops_domain::{Wallet, WalletFilter};

/// How long the page waits for one chain: a slow chain is shown as unavailable rather
/// than holding the others.
const CHAIN_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// One wallet's native balance on one chain.
#[derive(Debug)]
pub struct ChainHolding {
    /// Chain slug.
    pub chain: String,
    /// Chain name.
    pub chain_name: String,
    /// The native balance, or why the chain could not be read (a chain down hides nothing
    /// else on the page).
    pub native: std::result::Result<Balance, String>,
    /// The wallet's page on the chain's explorer.
    pub explorer_url: Option<String>,
}

/// A wallet and what it holds.
#[derive(Debug)]
pub struct Holding {
    /// The wallet.
    pub wallet: Wallet,
    /// Its native balance on each chain of its family that was read.
    pub chains: Vec<ChainHolding>,
    /// Names of the chains of its family left unread: not configured, not used.
    pub other_chains: Vec<String>,
}

/// What users' wallets hold, read over the parts it needs.
#[derive(Debug, Clone)]
pub struct Holdings {
    wallets: Wallets,
    transactions: Transactions,
    chains: std::sync::Arc<Registry>,
    balances: Balances,
}

impl Holdings {
    /// Holdings read from `wallets`, `transactions` (the chains a user used), `chains` and
    /// `balances`.
    pub fn new(
        wallets: Wallets,
        transactions: Transactions,
        chains: std::sync::Arc<Registry>,
        balances: Balances,
    ) -> Self {
        Self {
            wallets,
            transactions,
            chains,
            balances,
        }
    }

    /// Every wallet of `user_id`, oldest first, with its native balances on the chains
    /// configured or used (on every chain of its family with `all_chains`), all read at
    /// once; straight from the chains with `fresh`.
    pub async fn holdings(
        &self,
        user_id: Uuid,
        fresh: bool,
        all_chains: bool,
    ) -> Result<Vec<Holding>> {
        let wallets = self.wallets.list(user_id, WalletFilter::default()).await?;
        let used = self.transactions.chains_used(user_id).await?;
        let used = &used;
        let reads = wallets.into_iter().map(|wallet| async move {
            let (chains, others): (Vec<&Chain>, Vec<&Chain>) = self
                .chains
                .all()
                .filter(|c| c.family() == wallet.address.family())
                .partition(|c| all_chains || c.configured() || used.iter().any(|u| u == c.slug()));
            let other_chains = others.iter().map(|c| c.name().to_owned()).collect();
            let balances = join_all(
                chains
                    .iter()
                    .map(|chain| self.native(chain, &wallet, fresh)),
            )
            .await;
            let address = wallet.address.to_string();
            let chains = chains
                .into_iter()
                .zip(balances)
                .map(|(chain, native)| ChainHolding {
                    chain: chain.slug().to_owned(),
                    chain_name: chain.name().to_owned(),
                    native,
                    explorer_url: chain.explorer_address_url(&address),
                })
                .collect();
            Holding {
                wallet,
                chains,
                other_chains,
            }
        });
        Ok(join_all(reads).await)
    }

    async fn native(
        &self,
        chain: &Chain,
        wallet: &Wallet,
        fresh: bool,
    ) -> std::result::Result<Balance, String> {
        let read = self.balances.read(chain, wallet, &[], true, fresh);
        match tokio::time::timeout(CHAIN_READ_TIMEOUT, read)
            .await
            .map_err(|_| "the chain did not answer in time".to_owned())?
        {
            Ok(balances) => balances
                .into_iter()
                .next()
                .ok_or_else(|| "no native balance read".to_owned()),
            Err(e) => Err(walletops_chains::without_urls(&e.to_string())),
        }
    }
}
