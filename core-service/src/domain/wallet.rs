//! Wallets as the domain sees them, and the proof type a signer demands.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{ChainFamily, WalletAddress};

/// A custodial wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wallet {
    /// Wallet id.
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// Its address, which also tells its family.
    pub address: WalletAddress,
    /// Provider kind, e.g. `embedded`.
    pub provider_type: String,
    /// Client integration, e.g. `walletops`.
    pub client_type: String,
    /// The provider's id for the wallet.
    pub provider_wallet_id: Option<String>,
    /// The owner's default for its family.
    pub is_default: bool,
    /// Delegated to the server signer.
    pub automation_enabled: bool,
    /// Linked to the signing provider.
    pub linked: bool,
    /// When it was made.
    pub created_at: DateTime<Utc>,
}

impl Wallet {
    /// The wallet's chain family.
    pub fn family(&self) -> ChainFamily {
        self.address.family()
    }
}

/// Why a wallet cannot be signed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSignable {
    /// Not linked to the signing provider.
    NotLinked,
    /// Not delegated to the server signer.
    NotDelegated,
}

/// A wallet that is linked to the signing provider and delegated to the server signer: the
/// only kind the signer accepts, so a write cannot reach the signer without the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegatedWallet(Wallet);

impl DelegatedWallet {
    /// The wallet.
    pub fn wallet(&self) -> &Wallet {
        &self.0
    }
}

impl TryFrom<Wallet> for DelegatedWallet {
    type Error = (NotSignable, Wallet);

    fn try_from(wallet: Wallet) -> Result<Self, Self::Error> {
        if !wallet.linked {
            return Err((NotSignable::NotLinked, wallet));
        }
        if !wallet.automation_enabled {
            return Err((NotSignable::NotDelegated, wallet));
        }
        Ok(Self(wallet))
    }
}

/// Filters of a wallet listing; every one optional.
#[derive(Debug, Default, Clone, Copy)]
pub struct WalletFilter {
    /// Only this family.
    pub family: Option<ChainFamily>,
    /// Only default wallets.
    pub default_only: bool,
    /// Only wallets delegated to the server signer.
    pub automation_only: bool,
}

/// A wallet about to be stored with its sealed private key.
#[derive(Debug)]
pub struct NewWallet {
    /// Owner.
    pub user_id: Uuid,
    /// Its address, which tells its family.
    pub address: WalletAddress,
    /// Make it the owner's default for the family (the first wallet of a family always is).
    pub make_default: bool,
    /// The private key, sealed by the keystore.
    pub key: SealedKey,
}

/// A private key sealed by the keystore, as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedKey {
    /// AES-GCM nonce, fresh for each sealing.
    pub nonce: Vec<u8>,
    /// Ciphertext and tag.
    pub ciphertext: Vec<u8>,
}

impl std::fmt::Debug for SealedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealedKey(..)")
    }
}
