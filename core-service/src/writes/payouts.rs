//! Payouts: many recipients paid from one wallet in one request, each exactly once.
//!
//! 1. `create_payout`: the caller admitted as for a write, its Idempotency-Key required;
//!    every item parsed as a send (violations named `items[i].field`), the wallet resolved
//!    (owned, delegated), the batch's total per asset checked against the wallet's balances
//!    (INSUFFICIENT_FUNDS naming each shortfall); then the payout and its items stored in
//!    one transaction under the key: a replay answers the same payout, another request
//!    under the key is IDEMPOTENT_BODY_MISMATCH. Nothing is signed yet.
//! 2. The runner every core runs leases running payouts (one core each) and makes each
//!    item not yet submitted as a Send of the payout's key, through `write_as`, under a key
//!    derived from the payout's and the item's index (`Payout::item_key`): made again after
//!    a crash or by another core, an item claims the same key and is paid once. Each item is
//!    judged by the key's limits, policy and approval threshold as a send is.
//! 3. A payout whose every item is final (failed before signing, or its transaction
//!    final) is completed.

use std::{future::Future, time::Duration};

use alloy::primitives::U256;
use chrono::Utc;
use tonic::metadata::MetadataMap;
use uuid::Uuid;
use walletops_proto::v1 as pb;

use super::{Gate, Write, Written};
use crate::{
    Core,
    auth::{Caller, Credential, KeyState, Operation},
    error::{Result, WalletOpsError},
    idempotency::{Canonical, IdempotencyKey, request_hash},
    requests::{Transfer, payouts::PayoutRequest},
};
use walletops_domain::{ItemMade, Payout, PayoutItem, PayoutState, WalletAddress};
use walletops_store::PayoutStored;

/// How often running payouts are looked at.
const POLL_EVERY: Duration = Duration::from_millis(500);
/// Payouts leased at once.
const BATCH: u64 = 4;
/// How long a core holds a payout it makes.
const LEASE: chrono::Duration = chrono::Duration::seconds(120);
/// Items made at once within a payout.
const ITEMS_AT_ONCE: usize = 8;
/// The path payouts' keys are kept under.
const PATH: &str = "/payouts";

impl Canonical for pb::CreatePayoutRequest {
    fn canonical(&self) -> Self {
        self.clone()
    }
}

impl Core {
    /// Validates and stores the payout `req` of the caller of `metadata` (step 1).
    pub async fn create_payout(
        &self,
        metadata: &MetadataMap,
        req: pb::CreatePayoutRequest,
    ) -> Result<Payout> {
        let caller = self.admit(metadata, Operation::CreatePayout).await?;
        let key = IdempotencyKey::parse(
            metadata
                .get(walletops_proto::IDEMPOTENCY_KEY_HEADER)
                .map(|v| v.to_str().unwrap_or("")),
        )?;
        let parsed = PayoutRequest::parse(&self.chains, &req)?;
        let first = &parsed.items[0].1;
        let wallet = self
            .wallets
            .resolve_delegated(
                caller.user_id,
                first.chain.family(),
                first.from.as_ref(),
                "from",
            )
            .await?;
        let wallet = wallet.wallet().clone();
        self.funds_cover(&parsed, &wallet).await?;
        let now = Utc::now();
        let payout = Payout {
            id: Uuid::now_v7(),
            user_id: caller.user_id,
            key_id: caller.key_id(),
            idempotency_key: key.uuid(),
            request_hash: request_hash(PATH, &req.canonical_bytes()),
            chain: first.chain.slug().to_owned(),
            from: wallet.address.to_string(),
            state: PayoutState::Running,
            items: parsed
                .items
                .iter()
                .enumerate()
                .map(|(i, (send, _, reference))| PayoutItem {
                    index: u32::try_from(i).unwrap_or(u32::MAX),
                    to: send.to.trim().to_owned(),
                    asset: pb::Asset::try_from(send.asset)
                        .map(|a| {
                            a.as_str_name()
                                .trim_start_matches("ASSET_")
                                .to_ascii_lowercase()
                        })
                        .unwrap_or_default(),
                    token: send.token.clone().filter(|t| !t.is_empty()),
                    amount: send.amount.trim().to_owned(),
                    reference: reference.clone(),
                    made: ItemMade::Queued,
                })
                .collect(),
            created_at: now,
            completed_at: None,
        };
        match self.store.store_payout(&payout).await? {
            PayoutStored::New(p) | PayoutStored::Replay(p) => {
                self.payouts_wake.notify_one();
                Ok(p)
            }
            PayoutStored::Mismatch => Err(crate::idempotency::body_mismatch(key.uuid())),
        }
    }

    /// The caller of `metadata`'s payout `id`.
    pub async fn get_payout(&self, metadata: &MetadataMap, id: &str) -> Result<Payout> {
        let caller = self.admit(metadata, Operation::GetPayout).await?;
        let id: Uuid = id
            .trim()
            .parse()
            .map_err(|_| WalletOpsError::invalid("id", "must be a payout id (a UUID)"))?;
        self.store
            .get_payout(caller.user_id, id)
            .await?
            .ok_or_else(|| WalletOpsError::NotFound(format!("payout {id}")))
    }

    /// Where each item of `payout` stands: its state's name (QUEUED, PENDING_APPROVAL, FAILED,
    /// or its transaction's status), with its transaction (id and hash), approval or error.
    pub async fn payout_items(&self, payout: &Payout) -> Result<Vec<ItemStanding>> {
        let mut out = Vec::with_capacity(payout.items.len());
        for item in &payout.items {
            out.push(match &item.made {
                ItemMade::Queued => ItemStanding::named("QUEUED"),
                ItemMade::Held(approval) => ItemStanding {
                    approval_id: Some(*approval),
                    ..ItemStanding::named("PENDING_APPROVAL")
                },
                ItemMade::Failed(why) => ItemStanding {
                    error: Some(why.clone()),
                    ..ItemStanding::named("FAILED")
                },
                ItemMade::Submitted(tx) => {
                    let record = self.store.find_transaction(payout.user_id, *tx).await?;
                    ItemStanding {
                        state: record.as_ref().map_or_else(
                            || "SUBMITTED".to_owned(),
                            |r| r.status.as_str().to_ascii_uppercase(),
                        ),
                        transaction_id: Some(*tx),
                        hash: record.as_ref().and_then(|r| r.hash.clone()),
                        error: record.and_then(|r| r.error),
                        approval_id: None,
                    }
                }
            });
        }
        Ok(out)
    }

    /// Whether `wallet` holds, per asset, at least what `parsed`'s items move together.
    async fn funds_cover(
        &self,
        parsed: &PayoutRequest,
        wallet: &walletops_domain::Wallet,
    ) -> Result<()> {
        let chain = &parsed.items[0].1.chain;
        // Per asset (`None`: the native coin); a payout moves few assets.
        let mut totals: Vec<(Option<WalletAddress>, U256)> = Vec::new();
        for (_, send, _) in &parsed.items {
            let (token, amount) = match send.transfer {
                Transfer::Evm { token, amount, .. } => (token.map(WalletAddress::Evm), amount),
                Transfer::Solana { mint, amount, .. } => {
                    (mint.map(WalletAddress::Solana), U256::from(amount))
                }
            };
            match totals.iter_mut().find(|(t, _)| *t == token) {
                Some((_, total)) => *total = total.saturating_add(amount),
                None => totals.push((token, amount)),
            }
        }
        let tokens: Vec<WalletAddress> = totals.iter().filter_map(|(t, _)| *t).collect();
        let held = self
            .balances
            .read(chain, wallet, &tokens, true, true)
            .await?;
        let mut short = Vec::new();
        for (token, needed) in &totals {
            let name = token.as_ref().map(ToString::to_string);
            let has = held
                .iter()
                .find(|b| match (&name, &b.token) {
                    (None, None) => true,
                    (Some(t), Some(h)) => t.eq_ignore_ascii_case(h),
                    _ => false,
                })
                .map_or(U256::ZERO, |b| b.raw);
            if has < *needed {
                short.push(format!(
                    "{}: the items move {needed}, the wallet holds {has}",
                    name.as_deref().unwrap_or("native")
                ));
            }
        }
        if short.is_empty() {
            Ok(())
        } else {
            Err(WalletOpsError::InsufficientFunds(format!(
                "the payout needs more than {} holds: {}",
                wallet.address,
                short.join("; ")
            )))
        }
    }

    /// Runs the payouts runner until `stop` resolves (steps 2 and 3).
    pub async fn run_payouts(&self, stop: impl Future<Output = ()>) {
        let owner = Uuid::now_v7();
        tokio::pin!(stop);
        loop {
            if let Err(e) = self.payouts_round(owner).await {
                tracing::warn!(error = %e, "payouts round");
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(POLL_EVERY) => {}
                () = self.payouts_wake.notified() => {}
            }
        }
    }

    /// One round: every leased payout's items made or followed.
    async fn payouts_round(&self, owner: Uuid) -> Result<()> {
        let now = Utc::now();
        for (id, user) in self
            .store
            .lease_running_payouts(owner, now, now + LEASE, BATCH)
            .await?
        {
            if let Err(e) = self.advance_payout(user, id).await {
                tracing::warn!(payout = %id, error = %e, "making a payout's items");
            }
        }
        Ok(())
    }

    /// Makes payout `id`'s items not yet submitted, and completes it once all are final.
    async fn advance_payout(&self, user: Uuid, id: Uuid) -> Result<()> {
        let Some(payout) = self.store.get_payout(user, id).await? else {
            return Ok(());
        };
        let caller = match self.payout_caller(&payout).await? {
            Ok(caller) => caller,
            Err(refusal) => {
                for item in payout.items.iter().filter(|i| !made(&i.made)) {
                    let failed = ItemMade::Failed(refusal.to_string());
                    self.store.note_payout_item(id, item.index, &failed).await?;
                }
                return Ok(());
            }
        };
        let pending: Vec<&PayoutItem> = payout.items.iter().filter(|i| !made(&i.made)).collect();
        for some in pending.chunks(ITEMS_AT_ONCE) {
            let outcomes = futures::future::join_all(
                some.iter()
                    .map(|item| self.make_item(&caller, &payout, item)),
            )
            .await;
            for (item, outcome) in some.iter().zip(outcomes) {
                if let Some(made) = outcome {
                    self.store.note_payout_item(id, item.index, &made).await?;
                }
            }
        }
        let payout = self.store.get_payout(user, id).await?.unwrap_or(payout);
        let mut all_final = true;
        for item in &payout.items {
            all_final &= match &item.made {
                ItemMade::Failed(_) => true,
                ItemMade::Submitted(tx) => self
                    .store
                    .find_transaction(user, *tx)
                    .await?
                    .is_some_and(|t| t.status.is_final()),
                ItemMade::Queued | ItemMade::Held(_) => false,
            };
        }
        if all_final && self.store.complete_payout(id, Utc::now()).await? {
            tracing::info!(payout = %id, items = payout.items.len(), "payout completed");
        }
        Ok(())
    }

    /// Makes `item` of `payout` as a Send of `caller` under the item's key: what became of
    /// it, or `None` when it should be tried again (a passing refusal).
    async fn make_item(
        &self,
        caller: &Caller,
        payout: &Payout,
        item: &PayoutItem,
    ) -> Option<ItemMade> {
        let asset = match item.asset.as_str() {
            "erc20" => pb::Asset::Erc20,
            "spl" => pb::Asset::Spl,
            _ => pb::Asset::Native,
        };
        let send = pb::SendRequest {
            chain: payout.chain.clone(),
            from: Some(payout.from.clone()),
            to: item.to.clone(),
            asset: asset.into(),
            token: item.token.clone(),
            amount: item.amount.clone(),
        };
        let key = IdempotencyKey::from(Payout::item_key(payout.idempotency_key, item.index));
        match self
            .write_as(caller, key, Write::Send(send), Gate::Thresholds)
            .await
        {
            Ok(Written::Submitted(s)) => Some(ItemMade::Submitted(s.id)),
            Ok(Written::Held(approval)) => Some(ItemMade::Held(approval.id)),
            Err(e) if passing(&e) => {
                tracing::info!(payout = %payout.id, item = item.index, error = %e, "a payout item waits");
                None
            }
            Err(e) => Some(ItemMade::Failed(format!("{}: {e}", e.code()))),
        }
    }

    /// The caller a payout's items are made as: the key that made it, while it stands.
    async fn payout_caller(
        &self,
        payout: &Payout,
    ) -> Result<std::result::Result<Caller, WalletOpsError>> {
        let Some(key_id) = payout.key_id else {
            return Ok(Err(WalletOpsError::Forbidden(
                "a payout is made under an API key".to_owned(),
            )));
        };
        let now = Utc::now();
        let key = self
            .keys
            .list(payout.user_id)
            .await?
            .into_iter()
            .find(|k| k.id == key_id);
        Ok(match key {
            Some(key) if matches!(key.state(now), KeyState::Active | KeyState::ExpiringSoon) => {
                Ok(Caller {
                    user_id: payout.user_id,
                    scopes: key.scopes,
                    credential: Credential::Key {
                        id: key.id,
                        prefix: key.prefix,
                        expires_at: key.expires_at,
                        limited: key.limited,
                        line: key.lineage_id,
                    },
                })
            }
            _ => Err(WalletOpsError::Forbidden(
                "the API key that made the payout was revoked or expired before this item was made"
                    .to_owned(),
            )),
        })
    }
}

/// Where a payout's item stands, as the API tells it.
#[derive(Debug, Clone, Default)]
pub struct ItemStanding {
    /// QUEUED, PENDING_APPROVAL, FAILED, or its transaction's status (SUBMITTED, CONFIRMED...).
    pub state: String,
    /// Its transaction record.
    pub transaction_id: Option<Uuid>,
    /// Its transaction's hash or signature.
    pub hash: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The approval it waits for.
    pub approval_id: Option<Uuid>,
}

impl ItemStanding {
    fn named(state: &str) -> Self {
        Self {
            state: state.to_owned(),
            ..Self::default()
        }
    }
}

/// Whether an item's write has an answer that stands (a submitted transaction or a
/// refusal); a held one is asked again until its approval is decided.
fn made(made: &ItemMade) -> bool {
    matches!(made, ItemMade::Submitted(_) | ItemMade::Failed(_))
}

/// Whether a refusal is for a passing reason (a node or part not answering): the item is
/// made again later, its key still free.
fn passing(e: &WalletOpsError) -> bool {
    matches!(
        e,
        WalletOpsError::ServiceUnavailable(_)
            | WalletOpsError::ProviderRpcError(_)
            | WalletOpsError::RateLimited { .. }
    )
}
