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
    /// When a provider wallet disappeared from the provider's listing; it is never signed
    /// for again.
    pub removed_at: Option<DateTime<Utc>>,
}

/// `clientType` of the wallets whose keys the service's own keystore holds.
pub const LOCAL_CLIENT_TYPE: &str = "walletops";
/// `providerType` of a wallet whose key the service or the provider holds (the keystore's
/// own, or the provider's `connector_type` for its wallets); anything else is an external
/// wallet the user linked (MetaMask, Phantom…), which the server can never sign for.
pub const EMBEDDED_PROVIDER_TYPE: &str = "embedded";
/// `providerType` of a wallet of the service's own whose key is in its HSM.
pub const HSM_PROVIDER_TYPE: &str = "hsm";

impl Wallet {
    /// The wallet's chain family.
    pub fn family(&self) -> ChainFamily {
        self.address.family()
    }

    /// Whether the wallet provider holds its key (else the service's own keystore does).
    pub fn held_by_provider(&self) -> bool {
        self.client_type != LOCAL_CLIENT_TYPE
    }

    /// Whether the service's HSM holds its key.
    pub fn in_hsm(&self) -> bool {
        !self.held_by_provider() && self.provider_type == HSM_PROVIDER_TYPE
    }

    /// The label of its key in the HSM: its id, as stored when the key was made.
    pub fn key_label(&self) -> String {
        self.provider_wallet_id
            .clone()
            .unwrap_or_else(|| self.id.to_string())
    }

    /// Whether it is an external wallet the user linked at the provider, whose key nobody
    /// here or at the provider holds.
    pub fn is_external(&self) -> bool {
        self.held_by_provider() && self.provider_type != EMBEDDED_PROVIDER_TYPE
    }
}

/// A wallet a provider user has linked, as the provider lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderWallet {
    /// Its address.
    pub address: WalletAddress,
    /// The provider's server wallet id, which signing needs; absent for external wallets
    /// and, with some providers, for embedded wallets not delegated.
    pub wallet_id: Option<String>,
    /// `connector_type`: `embedded` for the provider's own wallets (`providerType`).
    pub connector_type: String,
    /// `wallet_client_type`: `privy` for the provider's own wallets (`clientType`).
    pub client_type: String,
    /// Whether the user delegated it to the server (`automationEnabled`).
    pub delegated: bool,
    /// Its HD index among the user's embedded wallets of its chain type (0: the first).
    pub wallet_index: Option<u32>,
}

/// The provider's own client, whose embedded wallets the server may sign with once delegated.
const PROVIDER_CLIENT: &str = "privy";

impl ProviderWallet {
    /// Its chain family.
    pub fn family(&self) -> ChainFamily {
        self.address.family()
    }

    /// Whether the provider holds its key (an embedded wallet), so the server may sign with
    /// it once it is delegated.
    pub fn is_embedded(&self) -> bool {
        self.connector_type == EMBEDDED_PROVIDER_TYPE && self.client_type == PROVIDER_CLIENT
    }

    /// Whether it is the user's default of its family: the first embedded wallet.
    pub fn is_default(&self) -> bool {
        self.is_embedded() && self.wallet_index == Some(0)
    }

    /// Whether the server may sign with it: embedded and delegated.
    pub fn automation_enabled(&self) -> bool {
        self.is_embedded() && self.delegated
    }
}

/// Why a wallet cannot be signed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSignable {
    /// Not linked to the signing provider (its user was unlinked, or is gone there).
    NotLinked,
    /// Not delegated to the server signer (or an external wallet, which never can be).
    NotDelegated,
    /// A provider wallet delegated, but the provider gave no wallet id to sign with.
    NoWalletId,
    /// A provider wallet the provider no longer lists.
    Removed,
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
        if wallet.removed_at.is_some() {
            return Err((NotSignable::Removed, wallet));
        }
        if !wallet.linked {
            return Err((NotSignable::NotLinked, wallet));
        }
        if !wallet.automation_enabled {
            return Err((NotSignable::NotDelegated, wallet));
        }
        if wallet.held_by_provider() && wallet.provider_wallet_id.is_none() {
            return Err((NotSignable::NoWalletId, wallet));
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

/// A wallet about to be stored with what signs for it.
#[derive(Debug)]
pub struct NewWallet {
    /// Owner.
    pub user_id: Uuid,
    /// Its address, which tells its family.
    pub address: WalletAddress,
    /// Make it the owner's default for the family (the first wallet of a family always is).
    pub make_default: bool,
    /// Its key.
    pub key: NewKey,
}

/// Where a new wallet's private key is.
#[derive(Debug)]
pub enum NewKey {
    /// Sealed by the keystore, stored beside the wallet.
    Sealed(SealedKey),
    /// Generated in the HSM, labelled with the wallet's id `id` there; nothing of it stored.
    Hsm {
        /// The wallet's id, chosen before the key was generated.
        id: Uuid,
    },
}

/// Where the service keeps the keys of the wallets it generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Custody {
    /// Sealed in the local keystore under the master key.
    #[default]
    Keystore,
    /// Generated in a hardware security module, never leaving it.
    Hsm,
}

impl std::str::FromStr for Custody {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "keystore" | "" => Ok(Self::Keystore),
            HSM_PROVIDER_TYPE => Ok(Self::Hsm),
            other => Err(format!("custody must be keystore or hsm, not {other:?}")),
        }
    }
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

/// What a sync changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Wallets new to the service.
    pub added: usize,
    /// Wallets already known, brought up to date.
    pub updated: usize,
    /// Wallets the provider no longer lists, marked removed.
    pub removed: usize,
    /// Wallets listed whose address another WalletOps user holds: left alone.
    pub conflicts: usize,
}
