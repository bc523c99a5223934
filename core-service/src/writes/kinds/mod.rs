//! The write kinds. Each kind is one type in one file of this room, implementing `Kind`
//! (what the request is: its message, its scope, its idempotency path, its parse, its
//! summary for approvals) and `ParsedWrite` for its parsed request (how it is built on its
//! chain and what policy sees it do), and is registered once in `KINDS`, which is how a held
//! write's stored request finds its kind again. `Received<K>` makes any such kind a
//! `WriteKind`, the face the write path sees. A kind's request is its endpoint's proto
//! message, or a type of its own (a payout's unit) that says how it is kept (`Stored`).
//!
//! Adding a kind: write its file here, add its line to `KINDS`, and hand `Write::of::<K>(..)`
//! to `Core::write` from its RPC handler (CONTRIBUTING.md, "Adding a write kind").

mod approve;
mod call;
mod payout;
mod send;
mod swap;

pub use approve::ApproveWrite;
pub use call::CallWrite;
pub use payout::{PayoutUnit, PayoutUnitWrite};
pub use send::SendWrite;
pub use swap::SwapWrite;

use std::fmt::Debug;

use alloy::primitives::Address;

use crate::{
    auth::{Caller, Operation},
    error::{Result, WalletOpsError},
    idempotency::Canonical,
    policy::Act,
    quotes::Quotes,
    swaps::Swaps,
    transfers::{Prepared, Transfers},
};

use walletops_chains::{Chain, Registry};
use walletops_domain::{DelegatedWallet, Spend, WalletAddress};

/// Every write kind, by the path its requests are kept under: one line per kind.
const KINDS: &[Registered] = &[
    Registered::of::<send::SendWrite>(),
    Registered::of::<approve::ApproveWrite>(),
    Registered::of::<call::CallWrite>(),
    Registered::of::<swap::SwapWrite>(),
    Registered::of::<payout::PayoutUnitWrite>(),
];

/// A kind as the registry knows it: how its stored requests read back.
#[derive(Debug, Clone, Copy)]
struct Registered {
    /// The path its idempotency keys and held writes are kept under.
    path: &'static str,
    /// Its request, from the bytes `WriteKind::canonical_bytes` gave.
    decode: fn(&[u8]) -> std::result::Result<Write, String>,
}

impl Registered {
    const fn of<K: Kind>() -> Self {
        Self {
            path: K::PATH,
            decode: |bytes| Ok(Write::of::<K>(K::Message::read_back(bytes)?)),
        }
    }
}

/// A kind's request in the form its key stands for and a held write is kept in: a proto
/// message's canonical encoding (`idempotency::Canonical`), or a kind's own.
pub trait Stored: Sized {
    /// The bytes its idempotency key stands for, and the form a held write is kept in.
    fn stored_bytes(&self) -> Vec<u8>;

    /// The request kept as `bytes`, or why not.
    fn read_back(bytes: &[u8]) -> std::result::Result<Self, String>;
}

impl<M: Canonical + Default> Stored for M {
    fn stored_bytes(&self) -> Vec<u8> {
        self.canonical_bytes()
    }

    fn read_back(bytes: &[u8]) -> std::result::Result<Self, String> {
        M::decode(bytes).map_err(|e| e.to_string())
    }
}

/// A kind of write, as its file declares it.
pub trait Kind: Send + Sync + 'static {
    /// Its request as received (a proto message, or a kind's own type).
    type Message: Stored + Clone + Debug + Send + Sync;

    /// The path its idempotency key is kept under (its endpoint's, where it has one).
    const PATH: &'static str;

    /// The operation it is, for the scope it needs (`auth::operations`).
    const OPERATION: Operation;

    /// The operation a dry run of it needs beyond `SimulateWrite`, if any.
    const DRY_RUN_NEEDS: Option<Operation> = None;

    /// Parses every field of `message` (all violations in one INVALID_INPUT) for `caller`.
    /// `held`: it is made after a person approved it.
    fn parse(
        message: &Self::Message,
        makers: Makers<'_>,
        caller: &Caller,
        held: bool,
    ) -> impl Future<Output = Result<Box<dyn ParsedWrite>>> + Send;

    /// What `message` does, in a sentence for the person who decides on it.
    fn summary(message: &Self::Message, spend: &Spend, from: &WalletAddress) -> String;
}

/// A write of kind `K` as received.
pub struct Received<K: Kind>(pub K::Message);

impl<K: Kind> Debug for Received<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple(K::PATH).field(&self.0).finish()
    }
}

#[async_trait::async_trait]
impl<K: Kind> WriteKind for Received<K> {
    fn operation(&self) -> Operation {
        K::OPERATION
    }

    fn path(&self) -> &'static str {
        K::PATH
    }

    fn canonical_bytes(&self) -> Vec<u8> {
        self.0.stored_bytes()
    }

    fn dry_run_needs(&self) -> Option<Operation> {
        K::DRY_RUN_NEEDS
    }

    async fn parse(
        &self,
        makers: Makers<'_>,
        caller: &Caller,
        held: bool,
    ) -> Result<Box<dyn ParsedWrite>> {
        K::parse(&self.0, makers, caller, held).await
    }

    fn summary(&self, spend: &Spend, from: &WalletAddress) -> String {
        K::summary(&self.0, spend, from)
    }
}

/// What a kind's parse and build use of the core.
#[derive(Debug, Clone, Copy)]
pub struct Makers<'a> {
    /// Known chains.
    pub chains: &'a Registry,
    /// Trade quotes (a swap's named quote binds it).
    pub quotes: &'a Quotes,
    /// The write pipelines.
    pub transfers: &'a Transfers,
    /// Swaps.
    pub swaps: &'a Swaps,
}

/// A write as received, before any field is read: what the write path sees of its kind.
#[async_trait::async_trait]
pub trait WriteKind: Debug + Send + Sync + 'static {
    /// The operation it is, for the scope it needs (`auth::operations`).
    fn operation(&self) -> Operation;

    /// The path its idempotency key is kept under (its endpoint's, where it has one).
    fn path(&self) -> &'static str;

    /// Its canonical encoding (`idempotency::Canonical`): what its key stands for, and the
    /// form a held write is stored in.
    fn canonical_bytes(&self) -> Vec<u8>;

    /// The operation a dry run of it needs beyond `SimulateWrite`, if any.
    fn dry_run_needs(&self) -> Option<Operation> {
        None
    }

    /// Parses every field (all violations in one INVALID_INPUT) for `caller`.
    /// `held`: it is made after a person approved it.
    async fn parse(
        &self,
        makers: Makers<'_>,
        caller: &Caller,
        held: bool,
    ) -> Result<Box<dyn ParsedWrite>>;

    /// What it does, in a sentence for the person who decides on it.
    fn summary(&self, spend: &Spend, from: &WalletAddress) -> String;
}

/// A write's request, parsed into typed values.
#[async_trait::async_trait]
pub trait ParsedWrite: Debug + Send + Sync {
    /// The chain it writes to.
    fn chain(&self) -> &Chain;

    /// The wallet it names (`None`: the caller's default for the chain's family).
    fn from(&self) -> Option<&WalletAddress>;

    /// Builds it from `wallet` on its chain and simulates it: nothing is signed.
    /// `watch`: the tokens read around an EVM write's simulation (`EvmPipeline::prepare`).
    async fn build(
        &self,
        makers: Makers<'_>,
        wallet: &DelegatedWallet,
        watch: Option<&[Address]>,
    ) -> Result<Prepared>;

    /// What it is, as key policies tell writes apart, built as `prepared`.
    fn act(&self, _prepared: &Prepared) -> Act {
        Act::Transfer
    }
}

/// A write as received, of any kind: what a held write stores and runs again once approved.
#[derive(Debug)]
pub struct Write(Box<dyn WriteKind>);

impl Write {
    /// `kind` as a write.
    pub fn new(kind: impl WriteKind) -> Self {
        Self(Box::new(kind))
    }

    /// The request `message` of kind `K` as a write.
    pub fn of<K: Kind>(message: K::Message) -> Self {
        Self::new(Received::<K>(message))
    }

    /// The write stored as `bytes` under `path`, read back by its kind.
    pub(crate) fn decode(path: &str, bytes: &[u8]) -> Result<Self> {
        let kind = KINDS.iter().find(|k| k.path == path).ok_or_else(|| {
            WalletOpsError::Internal(anyhow::anyhow!("a held write has an unknown path {path}"))
        })?;
        (kind.decode)(bytes).map_err(|e| {
            WalletOpsError::Internal(anyhow::anyhow!(
                "a held {path} request does not decode: {e}"
            ))
        })
    }
}

impl std::ops::Deref for Write {
    type Target = dyn WriteKind;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_path() {
        let mut paths: Vec<_> = KINDS.iter().map(|k| k.path).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), KINDS.len());
    }

    #[test]
    fn a_stored_request_reads_back_as_its_kind() {
        let sent = Write::of::<SendWrite>(walletops_proto::v1::SendRequest {
            chain: "anvil".to_owned(),
            to: "0x00000000000000000000000000000000000000aa".to_owned(),
            amount: "1".to_owned(),
            ..Default::default()
        });
        let back = Write::decode(sent.path(), &sent.canonical_bytes()).expect("decodes");
        assert_eq!(back.path(), "/send");
        assert_eq!(back.canonical_bytes(), sent.canonical_bytes());
        assert!(Write::decode("/nowhere", b"").is_err());
        let unit = Write::of::<PayoutUnitWrite>(PayoutUnit {
            chain: "anvil".to_owned(),
            from: WalletAddress::Evm(Address::repeat_byte(1)),
            transfers: vec![walletops_domain::Transfer::Evm {
                to: Address::repeat_byte(2),
                token: Some(Address::repeat_byte(3)),
                amount: alloy::primitives::U256::from(7),
            }],
        });
        let back = Write::decode(unit.path(), &unit.canonical_bytes()).expect("decodes");
        assert_eq!(back.path(), "/payouts");
        assert_eq!(back.canonical_bytes(), unit.canonical_bytes());
        assert!(Write::decode("/payouts", b"{\"chain\": \"anvil\"}").is_err());
    }
}
