//! One step of a Solana cluster's deposit scan: the signatures of each wallet and of each of
//! its token accounts (an SPL transfer to an existing token account does not name its
//! owner) newer than the last one seen (`getSignaturesForAddress`, at `confirmed`), then
//! each new transaction's balances before and after: lamports a wallet gained and token
//! amounts its accounts gained, per mint, are its deposits. Pending deposits in finalized
//! slots are confirmed.

use std::collections::{BTreeSet, HashMap};

use solana_pubkey::Pubkey;

use super::{Found, scanner::Scan};
use crate::error::WalletOpsError;
use alloy::primitives::U256;
use walletops_chains::{
    Chain,
    solana::{BalanceChanges, SolanaClient},
};
use walletops_domain::{ChainFamily, NATIVE_ASSET, Wallet};
use walletops_store::ScanStep;

/// Signatures read of an address never scanned before: what arrived shortly before the scan
/// was turned on.
const FIRST_LOOK: usize = 100;
/// Signatures read of an address at once afterwards.
const AT_ONCE: usize = 1000;

/// One step of `chain`'s scan.
pub(super) async fn step(scan: &Scan, chain: &Chain) -> Result<(), WalletOpsError> {
    if chain.deposits().is_none() {
        return Ok(());
    }
    let client = scan.solana.get(chain);
    let wallets: HashMap<Pubkey, Wallet> = scan
        .store
        .wallets_of_family(ChainFamily::Solana)
        .await?
        .into_iter()
        .filter_map(|w| Some((w.address.solana()?, w)))
        .collect();
    let (newest, signatures) = new_signatures(scan, chain, &client, &wallets).await?;
    let now = crate::clock::now();
    let mut deposits = Vec::new();
    for (slot, signature) in signatures {
        // A transaction its address lists but the node cannot give yet: the step is made
        // again, from the same cursors.
        let changes = client.balance_changes(&signature).await?.ok_or_else(|| {
            WalletOpsError::ProviderRpcError(format!("transaction {signature} is not readable yet"))
        })?;
        if changes.failed {
            continue;
        }
        for (wallet, asset, amount, from) in credits(&changes, &wallets) {
            let found = Found {
                chain,
                wallet,
                tx: signature.clone(),
                asset,
                amount: U256::from(u128::try_from(amount).unwrap_or_default()),
                from: from.map(|f| f.to_string()),
                block: slot.max(changes.slot),
                block_hash: None,
                rank: 0,
            };
            deposits.push(found.deposit(now));
        }
    }
    let step = ScanStep {
        deposits,
        signatures: newest,
        ..ScanStep::default()
    };
    if !scan
        .store
        .record_scan(chain.slug(), scan.owner, step)
        .await?
    {
        return Ok(());
    }
    let finalized = client.finalized_slot().await?;
    scan.store
        .confirm_deposits(chain.slug(), Some(finalized), None)
        .await?;
    Ok(())
}

/// The successful transactions listed for `wallets` and their token accounts since each
/// address's cursor, by slot, and each address's newest signature (its next cursor).
async fn new_signatures(
    scan: &Scan,
    chain: &Chain,
    client: &SolanaClient,
    wallets: &HashMap<Pubkey, Wallet>,
) -> Result<(Vec<(String, String)>, Vec<(u64, String)>), WalletOpsError> {
    let seen = scan.store.deposit_signatures(chain.slug()).await?;
    let mut addresses = Vec::new();
    for owner in wallets.keys() {
        addresses.push(*owner);
        addresses.extend(client.token_accounts_owned_by(owner).await?);
    }
    let mut newest = Vec::new();
    let mut signatures = BTreeSet::new();
    for address in addresses {
        let key = address.to_string();
        let until = seen.get(&key).map(String::as_str);
        let limit = if until.is_some() { AT_ONCE } else { FIRST_LOOK };
        let found = client.signatures_for(&address, until, limit).await?;
        if let Some(first) = found.first() {
            newest.push((key, first.signature.clone()));
        }
        for s in found.into_iter().filter(|s| !s.failed) {
            signatures.insert((s.slot, s.signature));
        }
    }
    Ok((newest, signatures.into_iter().collect()))
}

/// What `changes` credited to `wallets`: each wallet, asset, amount and the likely sender
/// (the fee payer for coin; for a token, an account of the mint whose balance fell).
fn credits<'w>(
    changes: &BalanceChanges,
    wallets: &'w HashMap<Pubkey, Wallet>,
) -> Vec<(&'w Wallet, String, i128, Option<Pubkey>)> {
    let mut credits = Vec::new();
    for (account, delta) in &changes.lamports {
        if let Some(wallet) = wallets.get(account).filter(|_| *delta > 0) {
            let from = changes.fee_payer.filter(|p| p != account);
            credits.push((wallet, NATIVE_ASSET.to_owned(), *delta, from));
        }
    }
    for ((owner, mint), delta) in &changes.tokens {
        if let Some(wallet) = wallets.get(owner).filter(|_| *delta > 0) {
            let from = changes
                .tokens
                .iter()
                .find(|((_, m), d)| m == mint && **d < 0)
                .map(|((o, _), _)| *o);
            credits.push((wallet, mint.to_string(), *delta, from));
        }
    }
    credits
}
