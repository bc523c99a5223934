//! The wallet guard (EVM, opt-in per wallet and chain). `walletops wallets guard enable`
//! delegates the wallet by EIP-7702 to the guard contract (`contract`); from then on a
//! limited key's write from it is signed as the wallet's call to itself, `execute`, which
//! makes the write's call and then reverts the whole transaction if any limited asset's
//! balance fell, or any watched allowance rose, beyond what the key reserved. What a called
//! contract decides at execution (a front-runner's flag, a price read on chain) can then take
//! no more than the simulation showed. `guard disable` delegates to the zero address, which
//! gives the wallet back its empty code.
//!
//! The delegation is one type-4 transaction from the wallet itself, under the nonce ledger's
//! lock: its own nonce and the next (an authority that sends its own authorization signs it
//! with the nonce after the transaction's), so the ledger hands out two.

mod contract;

use std::{sync::Arc, time::Duration};

use alloy::{
    consensus::{SignableTransaction as _, TxEip7702, TxEnvelope},
    eips::{Encodable2718 as _, eip7702::Authorization},
    primitives::{Address, B256, Bytes, U256},
};
use walletops_domain::{DelegatedWallet, WalletAddress};
use walletops_store::{Store, WalletGuard};

use crate::{
    error::{Result, WalletOpsError},
    signer::Signer,
};

pub use contract::{checks, delegation_code, execute, guard_address};
use walletops_chains::{
    Chain,
    evm::{BroadcastOutcome, EvmClient, EvmClients},
};

/// How long `enable` and `disable` wait for their transaction to be mined.
const MINED_WITHIN: Duration = Duration::from_secs(120);

/// What a delegation change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardChange {
    /// The guard contract (enable) or the zero address (disable).
    pub delegate: Address,
    /// The delegating transaction.
    pub hash: B256,
    /// Whether the guard contract was deployed by it.
    pub deployed: bool,
}

/// Enables and disables wallets' guards.
#[derive(Debug, Clone)]
pub struct Guards {
    store: Store,
    signer: Arc<dyn Signer>,
    clients: Arc<EvmClients>,
}

impl Guards {
    /// Guards signing with `signer`, allocating nonces from `store`'s ledger.
    pub fn new(store: Store, signer: Arc<dyn Signer>, clients: Arc<EvmClients>) -> Self {
        Self {
            store,
            signer,
            clients,
        }
    }

    /// Delegates `wallet` on `chain` to the guard (deploying the guard through the
    /// deployment proxy first, in the same transaction, where the chain has none yet), waits
    /// until it is mined and checks the wallet's code.
    pub async fn enable(&self, chain: &Chain, wallet: &DelegatedWallet) -> Result<GuardChange> {
        let client = self.clients.get(chain)?;
        let guard = guard_address();
        let deployed = client.code_at(guard).await?.is_empty();
        if deployed && client.code_at(contract::DEPLOYER).await?.is_empty() {
            return Err(WalletOpsError::SendFailed(format!(
                "{} has no deterministic deployment proxy at {}, which the guard is deployed through",
                chain.slug(),
                contract::DEPLOYER.to_checksum(None)
            )));
        }
        let (to, input) = if deployed {
            (contract::DEPLOYER, contract::deployment_input())
        } else {
            (evm_address(wallet)?, Bytes::new())
        };
        let hash = self
            .delegate(chain, &client, wallet, guard, to, input)
            .await?;
        // A delegation applies even when its transaction reverts: a deployment that failed
        // would leave the wallet delegated to an address without code, whose calls do
        // nothing and succeed.
        if client.code_at(guard).await?.is_empty() {
            return Err(WalletOpsError::SendFailed(format!(
                "the delegation {hash:#x} was mined, but the guard {} holds no code on {}: run `walletops wallets guard disable` before any write",
                guard.to_checksum(None),
                chain.slug()
            )));
        }
        self.store
            .set_wallet_guard(&WalletGuard {
                wallet_id: wallet.wallet().id,
                chain: chain.slug().to_owned(),
                guard: guard.to_checksum(None),
                hash: format!("{hash:#x}"),
                enabled_at: crate::clock::now(),
            })
            .await?;
        Ok(GuardChange {
            delegate: guard,
            hash,
            deployed,
        })
    }

    /// Removes `wallet`'s delegation on `chain` (to the zero address) and waits until it is
    /// mined: its writes run unguarded again.
    pub async fn disable(&self, chain: &Chain, wallet: &DelegatedWallet) -> Result<GuardChange> {
        let client = self.clients.get(chain)?;
        let from = evm_address(wallet)?;
        // Forgotten first: a write signed from here on is not wrapped in a call the wallet
        // may no longer answer.
        self.store
            .remove_wallet_guard(wallet.wallet().id, chain.slug())
            .await?;
        let hash = self
            .delegate(chain, &client, wallet, Address::ZERO, from, Bytes::new())
            .await?;
        Ok(GuardChange {
            delegate: Address::ZERO,
            hash,
            deployed: false,
        })
    }

    /// Sends `wallet`'s type-4 transaction to `to` with `input`, authorizing `delegate`, and
    /// waits for it to be mined with the wallet's code as the delegation makes it.
    async fn delegate(
        &self,
        chain: &Chain,
        client: &EvmClient,
        wallet: &DelegatedWallet,
        delegate: Address,
        to: Address,
        input: Bytes,
    ) -> Result<B256> {
        let from = evm_address(wallet)?;
        let chain_id = crate::recovery::evm::evm_chain_id(chain)?;
        let floor = client.pending_nonce(from).await?;
        let fees = client.fees().await?;
        self.signer.prepare(wallet).await?;
        let txn = self.store.begin().await?;
        let nonce = self
            .store
            .allocate_nonce(&txn, chain.chain_id(), from, Some(floor), 2)
            .await?;
        let authorization = Authorization {
            chain_id: U256::from(chain_id),
            address: delegate,
            nonce: nonce + 1,
        };
        let signature = self
            .signer
            .sign_evm(wallet, authorization.signature_hash())
            .await?;
        let authorization = authorization.into_signed(signature);
        let gas = client
            .estimate_delegation(from, to, &input, authorization.clone(), fees)
            .await?;
        let tx = TxEip7702 {
            chain_id,
            nonce,
            gas_limit: gas.saturating_add(gas / 5),
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
            to,
            value: U256::ZERO,
            access_list: Default::default(),
            authorization_list: vec![authorization],
            input,
        };
        let signature = self.signer.sign_evm(wallet, tx.signature_hash()).await?;
        let signed = tx.into_signed(signature);
        let hash = *signed.hash();
        let raw = TxEnvelope::from(signed).encoded_2718();
        txn.commit().await?;
        match client.broadcast(&raw).await {
            BroadcastOutcome::Accepted | BroadcastOutcome::Unknown(_) => {}
            BroadcastOutcome::Rejected(why) => {
                // Both nonces back, the later first; the node holds nothing of this.
                let txn = self.store.begin().await?;
                let back = self
                    .store
                    .release_nonce(&txn, chain.chain_id(), from, nonce + 1)
                    .await?
                    && self
                        .store
                        .release_nonce(&txn, chain.chain_id(), from, nonce)
                        .await?;
                txn.commit().await?;
                if !back {
                    tracing::warn!(%from, nonce, "a refused delegation's nonces were not the last handed out");
                }
                return Err(WalletOpsError::SendFailed(format!(
                    "the node refused the delegation: {why:?}"
                )));
            }
        }
        self.mined(client, hash, from, delegate).await?;
        Ok(hash)
    }

    /// Waits until `hash` is mined, then checks that `from`'s code delegates to `delegate`
    /// (none for the zero address).
    async fn mined(
        &self,
        client: &EvmClient,
        hash: B256,
        from: Address,
        delegate: Address,
    ) -> Result<()> {
        let deadline = tokio::time::Instant::now() + MINED_WITHIN;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            if client.receipt(hash).await?.is_some() {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(WalletOpsError::ServiceUnavailable(format!(
                    "the delegation {hash:#x} was not mined within {} s; run the command again once it is",
                    MINED_WITHIN.as_secs()
                )));
            }
        }
        let code = client.code_at(from).await?;
        let expected = if delegate.is_zero() {
            Bytes::new()
        } else {
            delegation_code(delegate)
        };
        if code != expected {
            return Err(WalletOpsError::SendFailed(format!(
                "the delegation {hash:#x} was mined, but wallet {} holds code {code} rather than {expected}",
                from.to_checksum(None)
            )));
        }
        Ok(())
    }
}

/// `wallet`'s EVM address.
fn evm_address(wallet: &DelegatedWallet) -> Result<Address> {
    match wallet.wallet().address {
        WalletAddress::Evm(a) => Ok(a),
        other => Err(WalletOpsError::invalid(
            "address",
            format!("{other} is not an EVM wallet: only EVM wallets have a guard"),
        )),
    }
}
