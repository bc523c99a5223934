//! The local keystore: wallet private keys sealed at rest with AES-256-GCM under a master key.
//!
//! **Invariant:** private key bytes exist only inside this module, in `Zeroizing` buffers that
//! are wiped on drop; they are never logged, returned or stored unsealed. Each sealed key
//! carries its wallet's family and address as associated data, so a ciphertext moved to
//! another wallet's row fails to open instead of signing for the wrong wallet.

mod hsm;
mod routed;

pub use hsm::{Hsm, HsmConfig, HsmSigner};
pub use routed::RoutedSigner;

use std::{fs, io::Write, path::Path};

use aes_gcm::{
    Aes256Gcm, KeyInit, Nonce,
    aead::{Aead, Payload},
};
use anyhow::Context;
use base64::{Engine, engine::general_purpose::STANDARD as B64};
use rand::RngCore;
use zeroize::Zeroizing;

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718,
};
use solana_hash::Hash;
use solana_message::Message;
use solana_signature::Signature;
use solana_transaction::{Transaction, versioned::VersionedTransaction};

use crate::error::WalletOpsError;
use walletops_domain::{ChainFamily, DelegatedWallet, SealedKey, WalletAddress};
use walletops_store::Store;

const MASTER_KEY_FILE: &str = "master.key";

/// Generates wallet keys and seals them under the master key.
pub struct Keystore {
    cipher: Aes256Gcm,
    /// Set once the database is known to be bound to this key (`bind_to`).
    bound: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for Keystore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keystore(..)")
    }
}

impl Keystore {
    /// The keystore for `configured` (base64 of 32 bytes) or, when none is configured, for
    /// the key in `data_dir/master.key`, generated there with mode 0600 on first start.
    ///
    /// `sample` is one key the database already holds: the master key must open it, and
    /// none is generated beside it. A master key that is not the one the wallets were
    /// sealed under (a data dir lost or not the same, another core's, a CLI run elsewhere)
    /// would seal new wallets under a second key and fail every signing of the old ones, so
    /// the start is refused instead.
    pub fn open(
        configured: Option<&str>,
        data_dir: &Path,
        sample: Option<(&WalletAddress, &SealedKey)>,
    ) -> anyhow::Result<Self> {
        let key = match configured {
            Some(b64) => decode_master_key(b64).context("master_key")?,
            None => {
                let path = data_dir.join(MASTER_KEY_FILE);
                anyhow::ensure!(
                    sample.is_none() || path.exists(),
                    "{} does not exist, but the database holds wallets sealed under a master key: point data_dir at the directory that holds their master.key, or set master_key; a new key could never open them",
                    path.display()
                );
                load_or_create_master_key(data_dir)?
            }
        };
        let cipher = Aes256Gcm::new_from_slice(key.as_slice())
            .map_err(|_| anyhow::anyhow!("master key must be 32 bytes"))?;
        let keystore = Self {
            cipher,
            bound: tokio::sync::OnceCell::new(),
        };
        if let Some((address, sealed)) = sample {
            keystore.open_key(address, sealed).map_err(|_| {
                anyhow::anyhow!(
                    "the master key ({}) does not open the wallets in the database: they were sealed under another one",
                    if configured.is_some() {
                        "master_key".to_owned()
                    } else {
                        data_dir.join(MASTER_KEY_FILE).display().to_string()
                    }
                )
            })?;
        }
        Ok(keystore)
    }

    /// A keystore over the master key `b64` (base64 of 32 bytes) alone: the new key of a
    /// rotation.
    pub fn from_master_key(b64: &str) -> anyhow::Result<Self> {
        let key = decode_master_key(b64)?;
        Ok(Self {
            cipher: Aes256Gcm::new_from_slice(key.as_slice())
                .map_err(|_| anyhow::anyhow!("master key must be 32 bytes"))?,
            bound: tokio::sync::OnceCell::new(),
        })
    }

    /// Whether the database's keystore check `stored` opens under this master key.
    pub(crate) fn opens_check(&self, stored: &SealedKey) -> bool {
        self.open_for(KEYSTORE_CHECK_AAD, stored)
            .is_ok_and(|text| text.as_slice() == KEYSTORE_CHECK_TEXT)
    }

    /// Re-seals every wallet key of `store`, every webhook endpoint's secret and the keystore
    /// check under `new`'s master key, in one transaction; how many wallet keys it re-sealed. Cores still running on this
    /// key then seal no new wallet, and sign only for wallets whose keys they read before.
    pub async fn rotate(&self, store: &Store, new: &Keystore) -> anyhow::Result<usize> {
        let new_check = new.seal_for(KEYSTORE_CHECK_AAD, KEYSTORE_CHECK_TEXT)?;
        Ok(store
            .rotate_keystore(
                |check| self.opens_check(check),
                |address, sealed| {
                    let secret = self.open_key(address, sealed)?;
                    new.seal(address, &secret)
                },
                |endpoint, sealed| {
                    let secret = self.open_webhook_secret(endpoint, sealed)?;
                    new.seal_webhook_secret(endpoint, &secret)
                },
                new_check,
            )
            .await?)
    }

    /// Generates a new wallet of `family`: its canonical address and its sealed private key.
    pub fn generate(&self, family: ChainFamily) -> anyhow::Result<(WalletAddress, SealedKey)> {
        let (address, secret): (WalletAddress, Zeroizing<Vec<u8>>) = match family {
            // The key bytes are copied out once, and that copy is wiped too.
            ChainFamily::Evm => {
                let signer = alloy::signers::local::PrivateKeySigner::random();
                let mut raw = signer.to_bytes().0;
                let secret = Zeroizing::new(raw.to_vec());
                zeroize::Zeroize::zeroize(&mut raw);
                (signer.address().into(), secret)
            }
            ChainFamily::Solana => {
                use solana_signer::Signer as _;
                let keypair = solana_keypair::Keypair::new();
                let mut raw = keypair.to_bytes();
                let secret = Zeroizing::new(raw.to_vec());
                zeroize::Zeroize::zeroize(&mut raw);
                (keypair.pubkey().into(), secret)
            }
        };
        let sealed = self.seal(&address, &secret)?;
        Ok((address, sealed))
    }

    fn seal(&self, address: &WalletAddress, secret: &[u8]) -> anyhow::Result<SealedKey> {
        self.seal_for(&associated_data(address), secret)
    }

    /// Seals `secret`, bound to `aad`.
    fn seal_for(&self, aad: &str, secret: &[u8]) -> anyhow::Result<SealedKey> {
        let mut nonce = [0u8; 12];
        rand::rng().fill_bytes(&mut nonce);
        let ciphertext = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: secret,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| anyhow::anyhow!("sealing a wallet key failed"))?;
        Ok(SealedKey {
            nonce: nonce.to_vec(),
            ciphertext,
        })
    }

    /// Seals the signing secret of webhook endpoint `endpoint`, bound to it.
    pub fn seal_webhook_secret(
        &self,
        endpoint: uuid::Uuid,
        secret: &walletops_domain::secret::Secret,
    ) -> anyhow::Result<SealedKey> {
        self.seal_for(&webhook_aad(endpoint), secret.expose().as_bytes())
    }

    /// Opens what `seal_webhook_secret(endpoint, …)` sealed.
    pub fn open_webhook_secret(
        &self,
        endpoint: uuid::Uuid,
        sealed: &SealedKey,
    ) -> anyhow::Result<walletops_domain::secret::Secret> {
        let text = self.open_for(&webhook_aad(endpoint), sealed).map_err(|_| {
            anyhow::anyhow!("the secret of webhook {endpoint} does not open under this master key")
        })?;
        let text = std::str::from_utf8(&text)
            .map_err(|_| anyhow::anyhow!("the secret of webhook {endpoint} is not text"))?;
        Ok(walletops_domain::secret::Secret::from(text.to_owned()))
    }

    /// Opens a sealed key for signing. The bytes are wiped when the buffer drops.
    pub(crate) fn open_key(
        &self,
        address: &WalletAddress,
        sealed: &SealedKey,
    ) -> anyhow::Result<Zeroizing<Vec<u8>>> {
        self.open_for(&associated_data(address), sealed)
            .map_err(|_| {
                anyhow::anyhow!("wallet key for {address} does not open under this master key")
            })
    }

    /// Opens what `seal_for(aad, …)` sealed.
    fn open_for(&self, aad: &str, sealed: &SealedKey) -> anyhow::Result<Zeroizing<Vec<u8>>> {
        anyhow::ensure!(
            sealed.nonce.len() == 12,
            "sealed key nonce must be 12 bytes"
        );
        self.cipher
            .decrypt(
                Nonce::from_slice(&sealed.nonce),
                Payload {
                    msg: &sealed.ciphertext,
                    aad: aad.as_bytes(),
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| anyhow::anyhow!("does not open under this master key"))
    }

    /// Binds the database to this master key, or checks that it is bound to it: the first
    /// to seal a wallet key or to start serving on a database stores a text sealed under its
    /// key, and one whose key does not open it is refused. Wallets alone cannot tell: two
    /// cores started at once on an empty database, each with a key it generated, would both
    /// pass that check and seal wallets the other cannot sign for. Commands that only read
    /// (listing keys from another machine, say) bind nothing.
    pub async fn bind_to(&self, store: &walletops_store::Store) -> anyhow::Result<()> {
        self.bound
            .get_or_try_init(|| async {
                let proposed = self.seal_for(KEYSTORE_CHECK_AAD, KEYSTORE_CHECK_TEXT)?;
                let stored = store.claim_keystore_check(proposed).await?;
                anyhow::ensure!(
                    self.opens_check(&stored),
                    "the master key does not open this database's keystore check: the \
                     database was begun under another master key (by another core, or a \
                     command run with another data_dir). Every core and command over one \
                     database needs the same master_key (or the same data_dir/master.key)"
                );
                Ok(())
            })
            .await
            .map(|_| ())
    }
}

/// What a webhook endpoint's sealed secret is bound to: its id, so that a ciphertext moved
/// to another endpoint's row does not open.
fn webhook_aad(endpoint: uuid::Uuid) -> String {
    format!("walletops:webhook:{endpoint}")
}

/// What the keystore check seals, and binds it to.
const KEYSTORE_CHECK_TEXT: &[u8] = b"walletops keystore check";
const KEYSTORE_CHECK_AAD: &str = "walletops:keystore-check";

/// Signs for wallets the service custodies: the local keystore today, a wallet provider's RPC
/// or a cloud KMS later. Key material never leaves an implementation, and only a wallet that
/// passed the ownership, link and delegation checks (`DelegatedWallet`) can be signed for.
#[async_trait::async_trait]
pub trait Signer: Send + Sync + std::fmt::Debug {
    /// Gets ready to sign for `wallet` (the local signer fetches and caches its sealed key).
    /// Writers call it before they open the database transaction that signs, so signing
    /// inside that transaction needs no second database connection: with every pooled
    /// connection held by a transaction waiting for the nonce row, it would never get one.
    async fn prepare(&self, _wallet: &DelegatedWallet) -> Result<(), WalletOpsError> {
        Ok(())
    }

    /// Signs a 32-byte EVM digest (a transaction's signature hash) for `wallet`.
    async fn sign_evm(
        &self,
        wallet: &DelegatedWallet,
        hash: alloy::primitives::B256,
    ) -> Result<alloy::primitives::Signature, WalletOpsError>;

    /// Signs a serialized Solana message for `wallet`.
    async fn sign_solana(
        &self,
        wallet: &DelegatedWallet,
        message: &[u8],
    ) -> Result<[u8; 64], WalletOpsError>;

    /// Signs EIP-1559 `tx` for `wallet`: the signed envelope's bytes (EIP-2718) and its hash.
    async fn sign_eip1559(
        &self,
        wallet: &DelegatedWallet,
        tx: TxEip1559,
    ) -> Result<(Vec<u8>, String), WalletOpsError> {
        let signature = self.sign_evm(wallet, tx.signature_hash()).await?;
        let signed = tx.into_signed(signature);
        let hash = format!("{:#x}", signed.hash());
        Ok((TxEnvelope::from(signed).encoded_2718(), hash))
    }

    /// Signs Solana `message` with `blockhash` set, for `wallet` as its only signer: the
    /// transaction and its signature.
    async fn sign_solana_message(
        &self,
        wallet: &DelegatedWallet,
        mut message: Message,
        blockhash: Hash,
    ) -> Result<(Transaction, String), WalletOpsError> {
        message.recent_blockhash = blockhash;
        let signature = Signature::from(self.sign_solana(wallet, &message.serialize()).await?);
        let signature_text = signature.to_string();
        Ok((
            Transaction {
                signatures: vec![signature],
                message,
            },
            signature_text,
        ))
    }

    /// Signs a transaction someone else built (a swap) for `wallet`, which must be its fee
    /// payer: its first signature slot is filled, the others are left as they came. The
    /// transaction and the wallet's signature.
    async fn sign_solana_built(
        &self,
        wallet: &DelegatedWallet,
        mut tx: VersionedTransaction,
    ) -> Result<(VersionedTransaction, String), WalletOpsError> {
        let payer = tx.message.static_account_keys().first().copied();
        if payer.map(WalletAddress::from) != Some(wallet.wallet().address)
            || tx.signatures.is_empty()
        {
            return Err(WalletOpsError::Internal(anyhow::anyhow!(
                "a built transaction is signed only by its fee payer"
            )));
        }
        let signature = Signature::from(self.sign_solana(wallet, &tx.message.serialize()).await?);
        tx.signatures[0] = signature;
        Ok((tx, signature.to_string()))
    }
}

/// Keeps `Signer` usable as a trait object.
struct _ObjectSafe(Box<dyn Signer>);

/// The signer over the local keystore: it reads the wallet's sealed key, opens it, signs,
/// and drops (zeroizes) it.
#[derive(Debug)]
pub struct LocalSigner {
    keystore: std::sync::Arc<Keystore>,
    store: Store,
    /// Sealed (still encrypted) keys by wallet id: a signing needs no database read.
    sealed: moka::sync::Cache<uuid::Uuid, (WalletAddress, SealedKey)>,
}

impl LocalSigner {
    /// A signer over `keystore`, reading sealed keys from `store`.
    pub fn new(keystore: std::sync::Arc<Keystore>, store: Store) -> Self {
        Self {
            keystore,
            store,
            sealed: moka::sync::Cache::new(100_000),
        }
    }

    async fn sealed_key(
        &self,
        wallet: &DelegatedWallet,
    ) -> Result<(WalletAddress, SealedKey), WalletOpsError> {
        let w = wallet.wallet();
        if let Some(hit) = self.sealed.get(&w.id) {
            return Ok(hit);
        }
        let found = self.store.sealed_key(w.id).await?.ok_or_else(|| {
            WalletOpsError::WalletNotDelegated(format!(
                "the server signer holds no key for wallet {}",
                w.address
            ))
        })?;
        self.sealed.insert(w.id, found.clone());
        Ok(found)
    }

    async fn secret(&self, wallet: &DelegatedWallet) -> Result<Zeroizing<Vec<u8>>, WalletOpsError> {
        let w = wallet.wallet();
        let (address, sealed) = self.sealed_key(wallet).await?;
        if address != w.address {
            return Err(WalletOpsError::Internal(anyhow::anyhow!(
                "sealed key of wallet {} is for another address",
                w.id
            )));
        }
        // A key that does not open was re-sealed under a new master key since this core
        // started (a rotation): it cannot sign until restarted with that key.
        self.keystore
            .open_key(&address, &sealed)
            .map_err(|_| WalletOpsError::ServiceUnavailable(crate::error::ROTATED_AWAY.to_owned()))
    }
}

#[async_trait::async_trait]
impl Signer for LocalSigner {
    async fn prepare(&self, wallet: &DelegatedWallet) -> Result<(), WalletOpsError> {
        self.sealed_key(wallet).await.map(drop)
    }

    async fn sign_evm(
        &self,
        wallet: &DelegatedWallet,
        hash: alloy::primitives::B256,
    ) -> Result<alloy::primitives::Signature, WalletOpsError> {
        let secret = self.secret(wallet).await?;
        sign_evm_hash(&secret, hash)
    }

    async fn sign_solana(
        &self,
        wallet: &DelegatedWallet,
        message: &[u8],
    ) -> Result<[u8; 64], WalletOpsError> {
        use solana_signer::Signer as _;
        let secret = self.secret(wallet).await?;
        let keypair = solana_keypair::Keypair::try_from(secret.as_slice())
            .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("Solana key: {e}")))?;
        Ok(keypair.sign_message(message).into())
    }
}

/// The libsecp256k1 context for signing, made once (its tables take a moment).
static SECP256K1: std::sync::LazyLock<secp256k1::Secp256k1<secp256k1::SignOnly>> =
    std::sync::LazyLock::new(secp256k1::Secp256k1::signing_only);

/// Signs `hash` with the secp256k1 key `secret`: RFC 6979 deterministic ECDSA with a low `s`
/// and its recovery id, the signature alloy's local signer (k256) makes, by libsecp256k1,
/// which takes about a quarter of the instructions; from the scalar alone, without deriving
/// the public key.
fn sign_evm_hash(
    secret: &[u8],
    hash: alloy::primitives::B256,
) -> Result<alloy::primitives::Signature, WalletOpsError> {
    let bad_key = || WalletOpsError::Internal(anyhow::anyhow!("EVM key is not a secp256k1 key"));
    let mut bytes = Zeroizing::new([0u8; 32]);
    if secret.len() != bytes.len() {
        return Err(bad_key());
    }
    bytes.copy_from_slice(secret);
    let mut key = secp256k1::SecretKey::from_byte_array(*bytes).map_err(|_| bad_key())?;
    let signed = SECP256K1.sign_ecdsa_recoverable(secp256k1::Message::from_digest(hash.0), &key);
    key.non_secure_erase();
    let (recovery, rs) = signed.serialize_compact();
    Ok(alloy::primitives::Signature::from_bytes_and_parity(
        &rs,
        i32::from(recovery) == 1,
    ))
}

fn associated_data(address: &WalletAddress) -> String {
    format!("walletops:{}:{address}", address.family().as_str())
}

fn decode_master_key(b64: &str) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let bytes = Zeroizing::new(
        B64.decode(b64.trim())
            .context("master key must be base64")?,
    );
    anyhow::ensure!(
        bytes.len() == 32,
        "master key must be 32 bytes, got {}",
        bytes.len()
    );
    Ok(bytes)
}

/// The master key in the key file at `path`.
fn read_master_key(path: &Path) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    warn_if_readable_by_others(path, "the master key file");
    let text = Zeroizing::new(
        fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
    );
    decode_master_key(&text).with_context(|| format!("in {}", path.display()))
}

fn load_or_create_master_key(data_dir: &Path) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let path = data_dir.join(MASTER_KEY_FILE);
    // The name, not what it points to: a key file that is a link to a secret not mounted
    // yet must fail the start, not have a new key made beside it.
    if fs::symlink_metadata(&path).is_ok() {
        return read_master_key(&path);
    }
    walletops_domain::files::create_private_dir(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let mut key = Zeroizing::new(vec![0u8; 32]);
    rand::rng().fill_bytes(&mut key);
    let text = Zeroizing::new(B64.encode(key.as_slice()));
    // Written whole and synced under a name of its own, then linked into place: the key
    // file appears complete or not at all (a crash mid-write left an empty key that refused
    // every later start), and the link fails when another process got there first, so two
    // processes starting at once never each keep a different key.
    let draft = data_dir.join(format!("{MASTER_KEY_FILE}.{}", uuid::Uuid::now_v7()));
    let written = walletops_domain::files::create_private_file(&draft)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .with_context(|| format!("writing {}", draft.display()));
    let linked = written.and_then(|()| match fs::hard_link(&draft, &path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    });
    let _ = fs::remove_file(&draft);
    if !linked? {
        // Another process made it first: its key is the one.
        return read_master_key(&path);
    }
    // The new name must outlive a crash too.
    fs::File::open(data_dir)
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("syncing {}", data_dir.display()))?;
    Ok(key)
}

/// The mode of the secret file at `path` when users other than its owner may read or
/// write it; `None` when only its owner may (or it cannot be read).
pub(crate) fn open_to_others(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Logs a warning when `what`, the secret file at `path`, is open to other users.
pub(crate) fn warn_if_readable_by_others(path: &Path, what: &str) {
    if let Some(mode) = open_to_others(path) {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:o}"),
            "{what} is readable by other users; chmod 600 it"
        );
    }
}

#[cfg(test)]
mod tests;
