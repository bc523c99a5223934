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

use tonic::metadata::MetadataMap;
use uuid::Uuid;
use walletops_proto::v1 as pb;

use super::{
    Gate, Write, Written,
    kinds::{Kind, PayoutUnit, PayoutUnitWrite},
};
use crate::{
    Core,
    auth::{Caller, Credential},
    error::{Result, WalletOpsError},
    idempotency::{Canonical, IdempotencyKey, request_hash},
    requests::{Transfer, payouts::PayoutRequest},
    runner::{self, Pace},
};
use walletops_domain::{
    ApprovalState, ChainFamily, ItemMade, ItemStanding, Payout, PayoutItem, PayoutState,
    WalletAddress,
};
use walletops_store::PayoutStored;

/// How often running payouts are looked at.
const POLL_EVERY: Duration = Duration::from_millis(500);
/// Payouts leased at once.
const BATCH: u64 = 4;
/// How long a core holds a payout it makes; each round renews it, so a core that dies
/// leaves its payouts to the others this long after its last round.
const LEASE: chrono::Duration = chrono::Duration::seconds(20);
/// Transactions made at once within a payout.
const ITEMS_AT_ONCE: usize = 8;
/// Transactions made per payout in one round, well within a lease; the next round (at
/// once, while there is more) renews the lease and goes on.
const ITEMS_PER_ROUND: usize = 64;
/// The path payouts' keys are kept under: their units' (each item's key is derived from its
/// payout's).
const PATH: &str = PayoutUnitWrite::PATH;

impl Canonical for pb::CreatePayoutRequest {
    fn canonical(&self) -> Self {
        Self {
            validate_only: false,
            ..self.clone()
        }
    }
}

impl Core {
    /// Validates and stores `caller`'s payout `req` under the idempotency key `metadata`
    /// carries (step 1).
    pub async fn create_payout(
        &self,
        caller: &Caller,
        metadata: &MetadataMap,
        req: pb::CreatePayoutRequest,
    ) -> Result<Payout> {
        let key = if req.validate_only {
            None
        } else {
            Some(IdempotencyKey::of(metadata)?)
        };
        self.create_payout_as(caller, key, req).await
    }

    /// Checks the payout `req` of user `user_id` itself (the command line), and stores it
    /// under `key` (unless `None`: only checked).
    pub async fn create_owner_payout(
        &self,
        user_id: Uuid,
        key: Option<Uuid>,
        req: pb::CreatePayoutRequest,
    ) -> Result<Payout> {
        let key = key.map(IdempotencyKey::from);
        self.create_payout_as(&owner(user_id, Uuid::nil()), key, req)
            .await
    }

    /// Checks `caller`'s payout `req` and stores it under `key`; without a key, answers it
    /// as it would be stored, its id nil.
    async fn create_payout_as(
        &self,
        caller: &Caller,
        key: Option<IdempotencyKey>,
        req: pb::CreatePayoutRequest,
    ) -> Result<Payout> {
        let payout = self.checked_payout(caller, key, &req).await?;
        let Some(key) = key else {
            return Ok(payout);
        };
        match self.store.store_payout(&payout).await? {
            PayoutStored::New(p) | PayoutStored::Replay(p) => {
                self.payouts_wake.notify_one();
                Ok(p)
            }
            PayoutStored::Mismatch => Err(crate::idempotency::body_mismatch(key.uuid())),
        }
    }

    /// The payout `req` of `caller` under `key`, every item and the funds checked: as it
    /// would be stored (its id nil without a key).
    async fn checked_payout(
        &self,
        caller: &Caller,
        key: Option<IdempotencyKey>,
        req: &pb::CreatePayoutRequest,
    ) -> Result<Payout> {
        let parsed = PayoutRequest::parse(&self.chains, req)?;
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
        let rent = self.payout_rent(&parsed).await?;
        // The key's limits first: a payout it may not make learns nothing of the balances.
        self.within_limits(caller, &parsed, rent).await?;
        self.funds_cover(&parsed, rent, &wallet).await?;
        let mut payout = payout_of(caller, key, req, &parsed, &wallet);
        payout.rent = (wallet.address.family() == ChainFamily::Solana).then_some(rent);
        if key.is_none() {
            payout.id = Uuid::nil();
        }
        Ok(payout)
    }

    /// `caller`'s payout `id`.
    pub async fn get_payout(&self, caller: &Caller, id: &str) -> Result<Payout> {
        let id: Uuid = id
            .trim()
            .parse()
            .map_err(|_| WalletOpsError::invalid("id", "must be a payout id (a UUID)"))?;
        self.store
            .get_payout(caller.user_id, id)
            .await?
            .ok_or_else(|| WalletOpsError::NotFound(format!("payout {id}")))
    }

    /// `caller`'s payouts that `filter` selects, newest first, at most `limit`; and the
    /// page token after them when there may be more.
    pub async fn list_payouts(
        &self,
        caller: &Caller,
        req: &pb::ListPayoutsRequest,
    ) -> Result<(Vec<Payout>, Option<Uuid>)> {
        let (filter, limit) = crate::requests::payouts::list(&self.chains, req)?;
        let payouts = self
            .store
            .list_payouts(caller.user_id, &filter, limit)
            .await?;
        let next = (payouts.len() as u64 == limit)
            .then(|| payouts.last().map(|p| p.id))
            .flatten();
        Ok((payouts, next))
    }

    /// Where each item of each of `payouts` stands (per payout, in item order).
    pub async fn payout_standings(&self, payouts: &[Payout]) -> Result<Vec<Vec<ItemStanding>>> {
        Ok(self.store.payout_standings(payouts).await?)
    }

    /// Runs the payouts runner until `stop` resolves (steps 2 and 3).
    pub async fn run_payouts(&self, stop: impl Future<Output = ()>) {
        let owner = Uuid::now_v7();
        runner::run(
            "payouts",
            Pace::After(POLL_EVERY),
            stop,
            || self.payouts_round(owner),
            || self.payouts_wake.notified(),
        )
        .await;
    }

    /// One round: every leased payout's items made or followed.
    async fn payouts_round(&self, owner: Uuid) -> Result<()> {
        let now = crate::clock::now();
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
        // What is paid in one transaction: an item, or on Solana the items of its pack.
        let mut units: Vec<Vec<&PayoutItem>> = Vec::new();
        for item in payout.items.iter().filter(|i| !made(&i.made)) {
            match units
                .iter_mut()
                .find(|u| item.pack.is_some() && u[0].pack == item.pack)
            {
                Some(unit) => unit.push(item),
                None => units.push(vec![item]),
            }
        }
        let more = units.len() > ITEMS_PER_ROUND;
        units.truncate(ITEMS_PER_ROUND);
        let mut progressed = false;
        for some in units.chunks(ITEMS_AT_ONCE) {
            let outcomes = futures::future::join_all(
                some.iter()
                    .map(|unit| self.make_unit(&caller, &payout, unit)),
            )
            .await;
            for (unit, outcome) in some.iter().zip(outcomes) {
                if let Some(made) = outcome {
                    progressed = true;
                    for item in unit {
                        self.store.note_payout_item(id, item.index, &made).await?;
                    }
                }
            }
        }
        if more && progressed {
            // The rest in the next round, at once.
            self.payouts_wake.notify_one();
            return Ok(());
        }
        let payout = self.store.get_payout(user, id).await?.unwrap_or(payout);
        let standings = self
            .store
            .payout_standings(std::slice::from_ref(&payout))
            .await?;
        let all_final = standings.iter().flatten().all(|s| s.is_final);
        if all_final
            && self
                .store
                .complete_payout((id, user, &payout.chain), crate::clock::now())
                .await?
        {
            tracing::info!(payout = %id, items = payout.items.len(), "payout completed");
        }
        Ok(())
    }

    /// Makes `unit` of `payout` (an item, or the items of a Solana pack) as a write of
    /// `caller` under the key of its first item: what became of it, or `None` when it should
    /// be tried again (a passing refusal).
    async fn make_unit(
        &self,
        caller: &Caller,
        payout: &Payout,
        unit: &[&PayoutItem],
    ) -> Option<ItemMade> {
        let first = unit.first()?;
        debug_assert!(
            first.pack.is_none_or(|pack| pack == first.index),
            "a pack is named by its first item"
        );
        let write = Write::of::<PayoutUnitWrite>(PayoutUnit {
            chain: payout.chain.clone(),
            from: payout.from,
            transfers: unit.iter().map(|item| item.transfer).collect(),
        });
        let key = IdempotencyKey::from(Payout::item_key(payout.idempotency_key, first.index));
        match self.write_as(caller, key, write, Gate::Thresholds).await {
            Ok(Written::Submitted(s)) => Some(ItemMade::Submitted(s.id)),
            Ok(Written::Held(approval)) => Some(ItemMade::Held(approval.id)),
            Err(e) if e.is_transient() => {
                tracing::warn!(payout = %payout.id, item = first.index, error = %e, "a payout item waits");
                None
            }
            // The item's key was used by an earlier version of this runner, which kept its
            // request in another form: what the key stands for is this item's.
            Err(e @ WalletOpsError::IdempotentBodyMismatch(_)) => {
                self.made_before(payout, key, e).await
            }
            Err(e) => Some(ItemMade::Failed(format!("{}: {e}", e.code()))),
        }
    }

    /// What the key of an item made in another request form (by an earlier version of the
    /// runner) stands for: the record it claimed, or the approval it is held for while that
    /// may still be made; failed with `e` otherwise; `None`, to ask again, when the store
    /// cannot tell now.
    async fn made_before(
        &self,
        payout: &Payout,
        key: IdempotencyKey,
        e: WalletOpsError,
    ) -> Option<ItemMade> {
        let found = async {
            if let Some(tx) = self
                .idempotency
                .record_of_derived_key(payout.user_id, key)
                .await?
            {
                return Ok(ItemMade::Submitted(tx));
            }
            Ok::<_, WalletOpsError>(
                match self.store.held_write(payout.user_id, key.uuid()).await? {
                    Some((approval, _))
                        if matches!(
                            approval.state,
                            ApprovalState::Pending | ApprovalState::Approved
                        ) =>
                    {
                        ItemMade::Held(approval.id)
                    }
                    _ => ItemMade::Failed(format!("{}: {e}", e.code())),
                },
            )
        };
        found
            .await
            .inspect_err(|err| tracing::warn!(payout = %payout.id, error = %err, "reading what a payout item's key stands for"))
            .ok()
    }

    /// The caller a payout's items are made as: the key that made it, while it stands; the
    /// owner itself for one made in the dashboard or on the command line.
    async fn payout_caller(
        &self,
        payout: &Payout,
    ) -> Result<std::result::Result<Caller, WalletOpsError>> {
        match payout.key_id {
            Some(key_id) => {
                self.standing_key(
                    payout.user_id,
                    key_id,
                    None,
                    "the API key that made the payout was revoked or expired before this item was made",
                )
                .await
            }
            None => Ok(Ok(owner(payout.user_id, payout.id))),
        }
    }
}

/// The payout `req` of `caller` under `key`, parsed as `parsed`, paid from `wallet`: its
/// items queued, packed on Solana.
fn payout_of(
    caller: &Caller,
    key: Option<IdempotencyKey>,
    req: &pb::CreatePayoutRequest,
    parsed: &PayoutRequest,
    wallet: &walletops_domain::Wallet,
) -> Payout {
    let packs = match wallet.address {
        WalletAddress::Solana(from) => {
            let items: Vec<_> = parsed
                .items
                .iter()
                .filter_map(|(_, send, _)| match send.transfer {
                    Transfer::Solana { to, mint, .. } => Some((mint, to)),
                    Transfer::Evm { .. } => None,
                })
                .collect();
            crate::transfers::packs::pack_items(&from, &items)
                .into_iter()
                .map(Some)
                .collect()
        }
        WalletAddress::Evm(_) => vec![None; parsed.items.len()],
    };
    Payout {
        id: Uuid::now_v7(),
        user_id: caller.user_id,
        key_id: caller.key_id(),
        idempotency_key: key.map_or_else(Uuid::nil, |k| k.uuid()),
        request_hash: request_hash(PATH, &req.canonical_bytes()),
        chain: parsed.items[0].1.chain.slug().to_owned(),
        from: wallet.address,
        state: PayoutState::Running,
        rent: None,
        items: parsed
            .items
            .iter()
            .zip(packs)
            .enumerate()
            .map(|(i, ((_, send, reference), pack))| PayoutItem {
                index: u32::try_from(i).unwrap_or(u32::MAX),
                transfer: send.transfer,
                reference: reference.clone(),
                pack,
                made: ItemMade::Queued,
            })
            .collect(),
        created_at: crate::clock::now(),
        completed_at: None,
    }
}

/// User `user_id` itself as a caller, with every scope, as a dashboard session acts (`id`
/// names what it acts for).
fn owner(user_id: Uuid, id: Uuid) -> Caller {
    Caller {
        user_id,
        scopes: walletops_domain::Scopes::ALL,
        credential: Credential::Session { id },
    }
}

/// Whether an item's write has an answer that stands (a submitted transaction or a
/// refusal); a held one is asked again until its approval is decided.
fn made(made: &ItemMade) -> bool {
    matches!(made, ItemMade::Submitted(_) | ItemMade::Failed(_))
}
