//! Keys in a hardware security module, through PKCS#11 (`cryptoki`): generated in the token,
//! sensitive and never extractable, every signature made by the device. secp256k1 for EVM
//! (`CKM_ECDSA` over the transaction's hash: raw `r‖s`, normalised to low-s, the recovery id
//! found by recovering the wallet's address), Ed25519 for Solana (`CKM_EDDSA`, pure).
//!
//! The module is loaded and the token logged into once per process. A PKCS#11 session may be
//! used by one thread at a time: signings take a session from a pool (`hsm.sessions`, opened
//! as needed) and run on the blocking pool. When the device fails (a token removed, an HSM
//! out of reach) the failing signing is answered 503 naming the HSM, nothing signed, and the
//! next one first reopens the module (`reopen`), so a token back signs without a restart. A
//! PIN the token refuses is tried again at most once a minute, and not after three refusals:
//! real devices lock a PIN after a few wrong tries. Answers say that the HSM cannot sign;
//! which module and token, and the device's own words, go to the log.

mod keys;
mod pin_tries;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use alloy::primitives::{Address, B256};
use cryptoki::{
    context::{CInitializeArgs, CInitializeFlags, Pkcs11},
    error::{Error as Pkcs11Error, RvError},
    mechanism::{
        Mechanism,
        eddsa::{EddsaParams, EddsaSignatureScheme},
    },
    object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle},
    session::{Session, UserType},
    slot::Slot,
    types::AuthPin,
};
use futures::StreamExt as _;

use super::Signer;
use crate::error::WalletOpsError;
use walletops_domain::{ChainFamily, DelegatedWallet, WalletAddress};

pub use keys::HsmConfig;
use keys::{ED25519_PARAMS, SECP256K1_PARAMS, ec_point, evm_signature};

/// A PKCS#11 token the service signs with (see the module docs).
pub struct Hsm {
    pkcs11: Pkcs11,
    /// The token's slot: found again when the module is reopened.
    slot: Mutex<Slot>,
    /// `hsm.token_label` and `hsm.slot`, to find it.
    token: (String, Option<u64>),
    pin: AuthPin,
    /// The device failed: the next signing reopens the module first (see `reopen`).
    stale: AtomicBool,
    /// The token's refusals of the PIN: logins are tried again at most once a minute, and
    /// not after three refusals, as a real device locks a PIN after a few wrong tries.
    pin_refused: Mutex<pin_tries::PinTries>,
    /// `hsm.sessions`.
    size: u32,
    /// Idle sessions, logged in.
    idle: Mutex<Vec<Session>>,
    /// Sessions in use or idle, at most `hsm.sessions`.
    permits: tokio::sync::Semaphore,
    /// Private key handles by label: found once.
    handles: Mutex<HashMap<String, ObjectHandle>>,
    /// The module and token, for messages.
    names: Arc<str>,
}

impl std::fmt::Debug for Hsm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hsm({})", self.names)
    }
}

/// The slot holding the token labelled `label` (in slot `id`, if given).
fn find_slot(pkcs11: &Pkcs11, label: &str, id: Option<u64>) -> Result<Option<Slot>, Pkcs11Error> {
    Ok(pkcs11.get_slots_with_token()?.into_iter().find(|slot| {
        id.is_none_or(|id| slot.id() == id)
            && pkcs11
                .get_token_info(*slot)
                .is_ok_and(|info| info.label().trim_end() == label)
    }))
}

impl Hsm {
    /// What the HSM did wrong (`what`), answered 503. The module, the token and the
    /// device's own words go to the log only: a caller learns that the HSM cannot sign,
    /// not how the operator's HSM is set up.
    fn fault(&self, what: impl std::fmt::Display) -> WalletOpsError {
        tracing::warn!(hsm = %self.names, "the HSM {what}");
        WalletOpsError::HsmUnavailable(format!(
            "the HSM {what}; nothing was signed (the service log names the device)"
        ))
    }

    /// A device error `e` while it was asked to `what`.
    fn failed(&self, what: &str, e: &Pkcs11Error) -> WalletOpsError {
        tracing::warn!(hsm = %self.names, error = %e, "the HSM failed to {what}");
        WalletOpsError::HsmUnavailable(format!(
            "the HSM failed to {what}; nothing was signed (the service log names the device and its error)"
        ))
    }

    /// The session pool's permits are gone: the process is stopping.
    fn closed(&self) -> WalletOpsError {
        self.fault("is closed")
    }
    /// Loads `config.module`, finds the token by its label (or `config.slot`) and logs in
    /// with the PIN: any of them wrong is a startup error that names it.
    pub fn open(config: &HsmConfig) -> anyhow::Result<Self> {
        let module = config.module.display().to_string();
        let pkcs11 = Pkcs11::new(&config.module)
            .map_err(|e| anyhow::anyhow!("hsm.module {module} could not be loaded: {e}"))?;
        match pkcs11.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
            Ok(()) | Err(Pkcs11Error::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
            Err(e) => anyhow::bail!("hsm.module {module} failed to initialise: {e}"),
        }
        let label = config.token_label.as_str();
        let slot = find_slot(&pkcs11, label, config.slot)
            .map_err(|e| anyhow::anyhow!("hsm.module {module} lists no slots: {e}"))?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "hsm.token_label: no token labelled {label:?}{} in {module}",
                    config
                        .slot
                        .map(|s| format!(" in slot {s}"))
                        .unwrap_or_default()
                )
            })?;
        let pin = AuthPin::new(config.pin()?.into());
        let names: Arc<str> = format!("{module}, token {label}").into();
        let size = config.sessions.max(1);
        let hsm = Self {
            pkcs11,
            slot: Mutex::new(slot),
            token: (config.token_label.clone(), config.slot),
            pin,
            stale: AtomicBool::new(false),
            pin_refused: Mutex::default(),
            size,
            idle: Mutex::default(),
            permits: tokio::sync::Semaphore::new(usize::try_from(size)?),
            handles: Mutex::default(),
            names,
        };
        let first = hsm.session().map_err(|e| match e {
            Pkcs11Error::Pkcs11(RvError::PinIncorrect | RvError::PinInvalid, _) => {
                anyhow::anyhow!("hsm.pin is not accepted by token {label:?}: {e}")
            }
            e => anyhow::anyhow!("opening a session on token {label:?} of {module}: {e}"),
        })?;
        hsm.idle().push(first);
        Ok(hsm)
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Session>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new session, logged in (the login is the token's: once any session is).
    fn session(&self) -> Result<Session, Pkcs11Error> {
        let slot = *self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let session = self.pkcs11.open_rw_session(slot)?;
        match session.login(UserType::User, Some(&self.pin)) {
            Ok(()) | Err(Pkcs11Error::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => Ok(session),
            Err(e) => Err(e),
        }
    }

    /// Reopens the module after the device failed: every session closed (no signing runs:
    /// all the pool's permits are held), the library finalized and initialized again, the
    /// token found again by its label and logged into. A token pulled out and put back, or
    /// an HSM reached again over the network, then signs without a restart.
    async fn reopen(self: &Arc<Self>) -> Result<(), WalletOpsError> {
        let _all = self
            .permits
            .acquire_many(self.size)
            .await
            .map_err(|_| self.closed())?;
        if !self.stale.load(Ordering::Acquire) {
            return Ok(());
        }
        let held_back = self
            .pin_refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .held_back(Instant::now());
        if let Some(why) = held_back {
            return Err(self.fault(why));
        }
        let hsm = self.clone();
        let reopened = tokio::task::spawn_blocking(move || hsm.reinitialize())
            .await
            .map_err(|e| {
                WalletOpsError::Internal(anyhow::anyhow!("reopening the HSM panicked: {e}"))
            })?;
        match reopened {
            Ok(session) => {
                self.idle().push(session);
                self.stale.store(false, Ordering::Release);
                tracing::info!(hsm = %self.names, "the HSM was reopened after a failure");
                Ok(())
            }
            Err(e) => {
                if let Pkcs11Error::Pkcs11(
                    RvError::PinIncorrect | RvError::PinLocked | RvError::PinExpired,
                    _,
                ) = e
                {
                    self.pin_refused
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .refused(Instant::now());
                }
                Err(self.failed("open again", &e))
            }
        }
    }

    /// `reopen`'s work on the device: a logged-in session of the token found anew.
    fn reinitialize(&self) -> Result<Session, Pkcs11Error> {
        self.idle().clear();
        self.handles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        // A library already finalized (or never initialized again) is what is wanted here.
        let _ = self.pkcs11.clone().finalize();
        match self
            .pkcs11
            .initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
        {
            Ok(()) | Err(Pkcs11Error::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
            Err(e) => return Err(e),
        }
        let (label, id) = &self.token;
        let slot = find_slot(&self.pkcs11, label, *id)?.ok_or(Pkcs11Error::Pkcs11(
            RvError::TokenNotPresent,
            cryptoki::context::Function::GetTokenInfo,
        ))?;
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = slot;
        self.session()
    }

    /// Runs `work` on a pooled session on the blocking pool. A device error drops the
    /// session and marks the module for `reopen` before the next signing.
    async fn with_session<T: Send + 'static>(
        self: &Arc<Self>,
        what: &'static str,
        work: impl FnOnce(&Self, &Session) -> Result<T, Pkcs11Error> + Send + 'static,
    ) -> Result<T, WalletOpsError> {
        if self.stale.load(Ordering::Acquire) {
            self.reopen().await?;
        }
        let _permit = self.permits.acquire().await.map_err(|_| self.closed())?;
        let hsm = self.clone();
        let done = tokio::task::spawn_blocking(move || {
            let session = match hsm.idle().pop() {
                Some(session) => session,
                None => hsm
                    .session()
                    .inspect_err(|_| hsm.stale.store(true, Ordering::Release))?,
            };
            let out = work(&hsm, &session);
            match &out {
                // The device lost the session, the token or the login: the module is
                // reopened before the next signing, and key handles found again.
                Err(Pkcs11Error::Pkcs11(..)) => hsm.stale.store(true, Ordering::Release),
                _ => hsm.idle().push(session),
            }
            out
        })
        .await
        .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("an HSM signing panicked: {e}")))?;
        done.map_err(|e| self.failed(what, &e))
    }

    /// Generates a key pair of `family` in the token, labelled `label` (a wallet's id): its
    /// address.
    pub async fn generate(
        self: &Arc<Self>,
        family: ChainFamily,
        label: String,
    ) -> Result<WalletAddress, WalletOpsError> {
        self.with_session("generate a key", move |_, session| {
            let (public, _) = key_pair(session, family, label.as_bytes(), true)?;
            Ok(point_of(session, public)?.and_then(|point| keys::address(family, &point)))
        })
        .await?
        .ok_or_else(|| self.fault("generated a key whose public point could not be read"))
    }

    /// Makes a test signature with a key pair of each curve that lives only as long as the
    /// check (a session object), and verifies it in software: the device signs as the
    /// service needs. The module, the token and the PIN were checked by `open`.
    pub async fn check(self: &Arc<Self>) -> Result<(), WalletOpsError> {
        let digest = B256::repeat_byte(0x5a);
        for family in [ChainFamily::Evm, ChainFamily::Solana] {
            let (point, raw) = self
                .with_session("make a test signature", move |_, session| {
                    let (public, private) = key_pair(session, family, b"walletops-check", false)?;
                    let point = point_of(session, public);
                    let signed = session.sign(&mechanism(family), private, digest.as_slice());
                    session.destroy_object(private)?;
                    session.destroy_object(public)?;
                    Ok((point?, signed?))
                })
                .await?;
            let verified = match (point.and_then(|p| keys::address(family, &p)), family) {
                (Some(WalletAddress::Evm(address)), _) => {
                    evm_signature(&raw, digest, address).is_some()
                }
                (Some(WalletAddress::Solana(key)), _) => {
                    solana_signature::Signature::try_from(raw.as_slice())
                        .is_ok_and(|s| s.verify(key.as_ref(), digest.as_slice()))
                }
                (None, _) => false,
            };
            if !verified {
                return Err(self.fault(format_args!(
                    "made a {family} test signature that does not verify"
                )));
            }
        }
        Ok(())
    }

    /// Times `n` signatures of `family`'s curve over the session pool (as many at once as it
    /// has sessions), with a key pair that lives only as long as the timing (session
    /// objects, seen by every session of the process).
    pub async fn time_signatures(
        self: &Arc<Self>,
        family: ChainFamily,
        n: u32,
    ) -> Result<std::time::Duration, WalletOpsError> {
        let (public, private) = self
            .with_session("make a test key", move |_, session| {
                key_pair(session, family, b"walletops-timing", false)
            })
            .await?;
        let at_once = usize::try_from(self.size).unwrap_or(1);
        let started = std::time::Instant::now();
        let signed: Result<Vec<_>, _> = futures::stream::iter(0..n)
            .map(|i| {
                self.with_session("sign", move |_, session| {
                    let digest = B256::left_padding_from(&i.to_be_bytes());
                    session.sign(&mechanism(family), private, digest.as_slice())
                })
            })
            .buffer_unordered(at_once)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect();
        let took = started.elapsed();
        self.with_session("remove the test key", move |_, session| {
            session.destroy_object(private)?;
            session.destroy_object(public)
        })
        .await?;
        signed.map(|_| took)
    }

    /// The private key labelled `label`, found once; `None`: the token has none.
    fn private_key(
        &self,
        session: &Session,
        label: &str,
    ) -> Result<Option<ObjectHandle>, Pkcs11Error> {
        let mut handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = handles.get(label) {
            return Ok(Some(*h));
        }
        let found = session.find_objects(&[
            Attribute::Class(ObjectClass::PRIVATE_KEY),
            Attribute::Label(label.as_bytes().to_vec()),
        ])?;
        let handle = found.first().copied();
        if let Some(h) = handle {
            handles.insert(label.to_owned(), h);
        }
        Ok(handle)
    }

    /// Signs `data` with the key labelled `label`, of `family`'s curve.
    async fn sign(
        self: &Arc<Self>,
        label: &str,
        family: ChainFamily,
        data: Vec<u8>,
    ) -> Result<Vec<u8>, WalletOpsError> {
        let owned = label.to_owned();
        let signed = self
            .with_session("sign", move |hsm, session| {
                match hsm.private_key(session, &owned)? {
                    Some(key) => session.sign(&mechanism(family), key, &data).map(Some),
                    // A key not found may be a token away: the module is reopened before
                    // the next signing, so a token put back is read again (the module may
                    // hold the view it had while the token was gone).
                    None => {
                        hsm.stale.store(true, Ordering::Release);
                        Ok(None)
                    }
                }
            })
            .await?;
        signed.ok_or_else(|| self.fault(format_args!("holds no key labelled {label}")))
    }

    /// Signs EVM digest `hash` with the key labelled `label`, whose address is `address`.
    pub async fn sign_evm(
        self: &Arc<Self>,
        label: &str,
        address: Address,
        hash: B256,
    ) -> Result<alloy::primitives::Signature, WalletOpsError> {
        let raw = self
            .sign(label, ChainFamily::Evm, hash.as_slice().to_vec())
            .await?;
        evm_signature(&raw, hash, address).ok_or_else(|| {
            self.fault(format_args!(
                "made a signature that does not recover {address}"
            ))
        })
    }

    /// Signs Solana `message` with the key labelled `label`, which must be `key`'s: a
    /// signature that does not verify under `key` (a label pointing at another key pair) is
    /// never returned.
    pub async fn sign_solana(
        self: &Arc<Self>,
        label: &str,
        key: solana_pubkey::Pubkey,
        message: &[u8],
    ) -> Result<[u8; 64], WalletOpsError> {
        let raw = self
            .sign(label, ChainFamily::Solana, message.to_vec())
            .await?;
        let raw: [u8; 64] = raw.try_into().map_err(|raw: Vec<u8>| {
            self.fault(format_args!(
                "made an Ed25519 signature of {} bytes",
                raw.len()
            ))
        })?;
        if !solana_signature::Signature::from(raw).verify(key.as_ref(), message) {
            return Err(self.fault(format_args!(
                "made a signature that does not verify under {key}"
            )));
        }
        Ok(raw)
    }

    /// Every key pair in the token: its label and address (for the audit).
    pub async fn key_pairs(
        self: &Arc<Self>,
    ) -> Result<Vec<(String, WalletAddress)>, WalletOpsError> {
        self.with_session("list its keys", |_, session| {
            let mut pairs = Vec::new();
            for handle in session.find_objects(&[Attribute::Class(ObjectClass::PUBLIC_KEY)])? {
                let attributes = session.get_attributes(
                    handle,
                    &[
                        AttributeType::Label,
                        AttributeType::KeyType,
                        AttributeType::EcPoint,
                    ],
                )?;
                let (mut label, mut family, mut point) = (None, None, None);
                for attribute in attributes {
                    match attribute {
                        Attribute::Label(l) => label = String::from_utf8(l).ok(),
                        Attribute::KeyType(KeyType::EC) => family = Some(ChainFamily::Evm),
                        Attribute::KeyType(KeyType::EC_EDWARDS) => {
                            family = Some(ChainFamily::Solana)
                        }
                        Attribute::EcPoint(p) => point = Some(p),
                        _ => {}
                    }
                }
                if let (Some(label), Some(family), Some(point)) = (label, family, point)
                    && let Some(address) = ec_point(&point).and_then(|p| keys::address(family, &p))
                {
                    pairs.push((label, address));
                }
            }
            Ok(pairs)
        })
        .await
    }
}

/// How a key of `family`'s curve signs: ECDSA over a digest hashed outside (Keccak-256 has
/// no PKCS#11 mechanism), or pure Ed25519 (RFC 8032) over the message.
fn mechanism(family: ChainFamily) -> Mechanism<'static> {
    match family {
        ChainFamily::Evm => Mechanism::Ecdsa,
        ChainFamily::Solana => Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure)),
    }
}

/// Generates a key pair of `family` labelled `label`, kept in the token (`token`) or for the
/// session only; the private half sensitive and never extractable.
fn key_pair(
    session: &Session,
    family: ChainFamily,
    label: &[u8],
    token: bool,
) -> Result<(ObjectHandle, ObjectHandle), Pkcs11Error> {
    let (mechanism, params) = match family {
        ChainFamily::Evm => (Mechanism::EccKeyPairGen, SECP256K1_PARAMS.to_vec()),
        ChainFamily::Solana => (Mechanism::EccEdwardsKeyPairGen, ED25519_PARAMS.to_vec()),
    };
    let public = [
        Attribute::Token(token),
        Attribute::Private(false),
        Attribute::Verify(true),
        Attribute::EcParams(params),
        Attribute::Label(label.to_vec()),
        Attribute::Id(label.to_vec()),
    ];
    let private = [
        Attribute::Token(token),
        Attribute::Private(true),
        Attribute::Sign(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Label(label.to_vec()),
        Attribute::Id(label.to_vec()),
    ];
    session.generate_key_pair(&mechanism, &public, &private)
}

/// The public point of key `public`, unwrapped.
fn point_of(session: &Session, public: ObjectHandle) -> Result<Option<Vec<u8>>, Pkcs11Error> {
    let read = session.get_attributes(public, &[AttributeType::EcPoint])?;
    Ok(read.into_iter().find_map(|a| match a {
        Attribute::EcPoint(p) => ec_point(&p),
        _ => None,
    }))
}

/// The signer of the wallets whose keys are in the HSM: each key is labelled with the
/// wallet's id there (`Wallet::key_label`).
#[derive(Debug, Clone)]
pub struct HsmSigner(pub Arc<Hsm>);

#[async_trait::async_trait]
impl Signer for HsmSigner {
    async fn sign_evm(
        &self,
        wallet: &DelegatedWallet,
        hash: B256,
    ) -> Result<alloy::primitives::Signature, WalletOpsError> {
        let WalletAddress::Evm(address) = wallet.wallet().address else {
            return Err(WalletOpsError::Internal(anyhow::anyhow!(
                "an EVM signature asked of Solana wallet {}",
                wallet.wallet().address
            )));
        };
        self.0
            .sign_evm(&wallet.wallet().key_label(), address, hash)
            .await
    }

    async fn sign_solana(
        &self,
        wallet: &DelegatedWallet,
        message: &[u8],
    ) -> Result<[u8; 64], WalletOpsError> {
        let w = wallet.wallet();
        let key = w.address.solana().ok_or_else(|| {
            WalletOpsError::Internal(anyhow::anyhow!("{} is not a Solana wallet", w.address))
        })?;
        self.0.sign_solana(&w.key_label(), key, message).await
    }
}
