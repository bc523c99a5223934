//! The signer every writer uses: a wallet's key is in the service's own keystore or with the
//! wallet provider, and each signing goes to the one that holds it.

use std::sync::Arc;

use alloy::consensus::TxEip1559;
use async_trait::async_trait;
use solana_hash::Hash;
use solana_message::{Message, VersionedMessage};
use solana_signature::Signature;
use solana_transaction::{Transaction, versioned::VersionedTransaction};

use super::{HsmSigner, LocalSigner, Signer};
use crate::error::WalletOpsError;
use walletops_chains::{provider::Privy, upstream::UpstreamError};
use walletops_domain::{DelegatedWallet, WalletAddress};

/// The local keystore's signer, the HSM's for wallets whose keys it holds, and the provider
/// for provider wallets.
#[derive(Debug)]
pub struct RoutedSigner {
    local: LocalSigner,
    hsm: Option<HsmSigner>,
    provider: Option<Arc<Privy>>,
}

impl RoutedSigner {
    /// Signs with `local`, with `hsm` for wallets whose keys are there, or with `provider`
    /// for wallets it holds.
    pub fn new(local: LocalSigner, hsm: Option<HsmSigner>, provider: Option<Arc<Privy>>) -> Self {
        Self {
            local,
            hsm,
            provider,
        }
    }

    /// The signer of a wallet whose key the service holds: the keystore, or the HSM.
    fn own(&self, wallet: &DelegatedWallet) -> Result<&dyn Signer, WalletOpsError> {
        let w = wallet.wallet();
        if !w.in_hsm() {
            return Ok(&self.local);
        }
        match &self.hsm {
            Some(hsm) => Ok(hsm),
            None => Err(WalletOpsError::HsmUnavailable(format!(
                "wallet {}'s key is in an HSM, and none is configured: set [hsm] module, token_label and pin",
                w.address
            ))),
        }
    }

    /// The provider and the wallet's id there, for a provider wallet; `None` for a local one.
    fn provider_for<'a>(
        &'a self,
        wallet: &'a DelegatedWallet,
    ) -> Result<Option<(&'a Privy, &'a str)>, WalletOpsError> {
        let w = wallet.wallet();
        if !w.held_by_provider() {
            return Ok(None);
        }
        let provider = self.provider.as_deref().ok_or_else(|| {
            WalletOpsError::ServiceUnavailable(format!(
                "wallet {} is held by the wallet provider, and none is configured: set provider.app_id and provider.app_secret",
                w.address
            ))
        })?;
        let id = w.provider_wallet_id.as_deref().ok_or_else(|| {
            WalletOpsError::WalletIdRequired(format!(
                "the wallet provider gave no wallet id for {}",
                w.address
            ))
        })?;
        Ok(Some((provider, id)))
    }
}

/// The error of a raw signing asked of a provider wallet: the provider signs whole
/// transactions only.
fn whole_transactions_only(wallet: &DelegatedWallet) -> WalletOpsError {
    WalletOpsError::Internal(anyhow::anyhow!(
        "wallet {} is held by the wallet provider, which signs whole transactions only",
        wallet.wallet().address
    ))
}

#[async_trait]
impl Signer for RoutedSigner {
    async fn prepare(&self, wallet: &DelegatedWallet) -> Result<(), WalletOpsError> {
        match self.provider_for(wallet)? {
            None => self.own(wallet)?.prepare(wallet).await,
            Some(_) => Ok(()),
        }
    }

    async fn sign_evm(
        &self,
        wallet: &DelegatedWallet,
        hash: alloy::primitives::B256,
    ) -> Result<alloy::primitives::Signature, WalletOpsError> {
        match self.provider_for(wallet)? {
            None => self.own(wallet)?.sign_evm(wallet, hash).await,
            Some(_) => Err(whole_transactions_only(wallet)),
        }
    }

    async fn sign_solana(
        &self,
        wallet: &DelegatedWallet,
        message: &[u8],
    ) -> Result<[u8; 64], WalletOpsError> {
        match self.provider_for(wallet)? {
            None => self.own(wallet)?.sign_solana(wallet, message).await,
            Some(_) => Err(whole_transactions_only(wallet)),
        }
    }

    async fn sign_eip1559(
        &self,
        wallet: &DelegatedWallet,
        tx: TxEip1559,
    ) -> Result<(Vec<u8>, String), WalletOpsError> {
        let Some((provider, id)) = self.provider_for(wallet)? else {
            return self.own(wallet)?.sign_eip1559(wallet, tx).await;
        };
        let address = wallet.wallet().address;
        let WalletAddress::Evm(from) = address else {
            return Err(whole_transactions_only(wallet));
        };
        let (bytes, hash) = provider
            .sign_eip1559(id, from, &tx)
            .await
            .map_err(|e| provider_error(&address, &e))?;
        Ok((bytes, format!("{hash:#x}")))
    }

    async fn sign_solana_message(
        &self,
        wallet: &DelegatedWallet,
        mut message: Message,
        blockhash: Hash,
    ) -> Result<(Transaction, String), WalletOpsError> {
        if self.provider_for(wallet)?.is_none() {
            return self
                .own(wallet)?
                .sign_solana_message(wallet, message, blockhash)
                .await;
        }
        message.recent_blockhash = blockhash;
        let required = usize::from(message.header.num_required_signatures);
        let unsigned = VersionedTransaction {
            signatures: vec![Signature::default(); required],
            message: VersionedMessage::Legacy(message),
        };
        let (signed, signature) = self.sign_solana_built(wallet, unsigned).await?;
        let VersionedMessage::Legacy(message) = signed.message else {
            return Err(whole_transactions_only(wallet));
        };
        Ok((
            Transaction {
                signatures: signed.signatures,
                message,
            },
            signature,
        ))
    }

    async fn sign_solana_built(
        &self,
        wallet: &DelegatedWallet,
        tx: VersionedTransaction,
    ) -> Result<(VersionedTransaction, String), WalletOpsError> {
        let Some((provider, id)) = self.provider_for(wallet)? else {
            return self.own(wallet)?.sign_solana_built(wallet, tx).await;
        };
        let address = wallet.wallet().address;
        let WalletAddress::Solana(signer) = address else {
            return Err(whole_transactions_only(wallet));
        };
        let signed = provider
            .sign_solana(id, &signer, &tx)
            .await
            .map_err(|e| provider_error(&address, &e))?;
        let signature = signed.signatures[0].to_string();
        Ok((signed, signature))
    }
}

/// The PROVIDER_RPC_ERROR of a failed call to the provider about `wallet`: the provider's
/// own words, never its credentials, and what to do.
fn provider_error(wallet: &WalletAddress, err: &UpstreamError) -> WalletOpsError {
    WalletOpsError::WalletProviderError(format!(
        "the wallet provider could not sign for wallet {wallet}: {err}; nothing was signed: retry"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_failure_names_the_wallet_and_says_nothing_was_signed() {
        let wallet: WalletAddress = alloy::primitives::Address::repeat_byte(7).into();
        let err = UpstreamError::Failed {
            message: "Privy did not answer in time; retrying may help".to_owned(),
        };
        let message = provider_error(&wallet, &err).to_string();
        assert!(message.contains(&wallet.to_string()), "{message}");
        assert!(message.contains("nothing was signed"), "{message}");
        assert!(message.contains("did not answer"), "{message}");
    }
}
