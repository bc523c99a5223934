//! The EVM write pipeline: simulate, allocate a nonce and sign and store in one database
//! transaction, then broadcast. A refusal of the first broadcast is handed to `recovery`.
//!
//! **Invariant:** a signed payload is stored before it is broadcast, and the nonce it uses is
//! allocated in the same database transaction that stores it. A node's definite refusal marks
//! the record failed and frees its nonce (or fills it when later nonces are out already); an
//! uncertain one leaves the record to the monitor, which sends the same bytes again.

use std::{
    collections::{HashMap, HashSet, hash_map::Entry},
    sync::{Arc, Mutex, PoisonError},
};

use alloy::{
    consensus::TxEip1559,
    primitives::{Address, Bytes, U256},
};
use tokio::sync::oneshot;
use uuid::Uuid;

mod foresee;
mod guarded;
mod lanes;
mod refusal;

use foresee::{Foresight, foresee};
use lanes::Lanes;

use super::{BroadcastLog, handed_over};
use crate::{
    error::{Result, WalletOpsError},
    idempotency::{Idempotency, Ticket, claimed_elsewhere, note_claimed},
    recovery::evm::{Ending, EvmRecovery, Resign, TRANSFER_GAS, evm_chain_id, held_by_node},
    signer::Signer,
};
use walletops_chains::{
    Chain,
    effects::Foreseen,
    evm::{BroadcastOutcome, EvmClient, EvmClients, Fees, Rejection, Signing, call_to},
};
use walletops_domain::{
    DelegatedWallet, OpenTransaction, Submission, TxKind, TxStatus, WalletAddress,
};
use walletops_store::{NewClaim, NewTransaction, Store, StoreError, Txn};

/// What an EVM write sends, parsed and ready.
#[derive(Debug, Clone)]
pub struct EvmIntent {
    /// What it does.
    pub kind: TxKind,
    /// Recipient or contract.
    pub to: Address,
    /// Native value in wei.
    pub value: U256,
    /// Calldata.
    pub input: Bytes,
    /// `native` or `erc20`, for transfers.
    pub asset: Option<String>,
    /// Token involved, if any.
    pub token: Option<Address>,
    /// Amount moved or approved, in base units.
    pub amount: Option<U256>,
    /// The recipient of a token transfer (`to` is then the token).
    pub beneficiary: Option<Address>,
    /// An ERC20 balance the sender must hold, checked before anything is signed.
    pub token_debit: Option<(Address, U256)>,
    /// The request as received, kept with the record for audit.
    pub request: serde_json::Value,
}

impl EvmIntent {
    /// The record of this write from wallet `w` on `chain`, its key, nonce, hash and
    /// payload still to be set; `guarded`: it runs through the wallet's guard.
    fn into_record(
        self,
        w: &walletops_domain::Wallet,
        chain: &Chain,
        guarded: bool,
    ) -> NewTransaction {
        NewTransaction {
            id: Uuid::now_v7(),
            user_id: w.user_id,
            wallet_id: w.id,
            chain: chain.slug().to_owned(),
            chain_id: chain.chain_id(),
            kind: self.kind,
            from: w.address,
            to: self.beneficiary.unwrap_or(self.to).to_checksum(None),
            asset: self.asset,
            token: self.token.map(|t| t.to_checksum(None)),
            amount: self.amount.map(|a| a.to_string()),
            request: self.request,
            hash: String::new(),
            nonce: None,
            signed_payload: Vec::new(),
            idempotency_key: None,
            note: None,
            valid_until: None,
            held_until: None,
            simulated_effects: None,
            guarded,
        }
    }
}

/// Refuses calldata to an address without code on `chain`: such a call succeeds and does
/// nothing, so a mistyped token or contract would be mined, recorded CONFIRMED, and move
/// nothing.
async fn callee_has_code(client: &EvmClient, chain: &Chain, intent: &EvmIntent) -> Result<()> {
    if !intent.input.is_empty() && !client.has_code(intent.to).await? {
        if intent.kind == TxKind::Swap {
            return Err(WalletOpsError::SendFailed(format!(
                "the swap's router {} holds no contract on {}",
                intent.to.to_checksum(None),
                chain.slug()
            )));
        }
        let field = if intent.token.is_some() {
            "token"
        } else {
            "to"
        };
        return Err(WalletOpsError::invalid(
            field,
            format!(
                "{} holds no contract on {}",
                intent.to.to_checksum(None),
                chain.slug()
            ),
        ));
    }
    Ok(())
}

/// The EVM pipeline.
#[derive(Debug, Clone)]
pub struct EvmPipeline {
    store: Store,
    signer: Arc<dyn Signer>,
    clients: Arc<EvmClients>,
    broadcasts: BroadcastLog,
    idempotency: Idempotency,
    recovery: EvmRecovery,
    lanes: Arc<Lanes>,
}

/// A wallet's lane: its chain id and address.
type LaneKey = (i64, Address);

/// A send that passed its checks, waiting to be given a nonce, signed and stored.
#[derive(Debug)]
struct Draft {
    chain: Chain,
    /// The chain's client, which broadcasts the batch.
    client: EvmClient,
    wallet: DelegatedWallet,
    /// The transaction, its nonce still to be set.
    tx: TxEip1559,
    /// The chain's pending nonce, for a wallet the ledger does not know yet.
    floor: Option<u64>,
    /// The wallet's address, which the lane and the nonce ledger are keyed by.
    from: Address,
    /// The record, its nonce, hash and payload still to be set.
    record: NewTransaction,
    claim: NewClaim,
}

/// A stored transaction and what the node said to its first broadcast.
type Sent = (OpenTransaction, BroadcastOutcome);

/// Whether a token call of `intent` (a transfer or an approval) answered `output`: some
/// tokens refuse by answering `false` instead of reverting, and the transaction would be
/// mined and do nothing.
fn refused_by_token(intent: &EvmIntent, output: &[u8]) -> bool {
    intent.token.is_some()
        && matches!(intent.kind, TxKind::Send | TxKind::Approve)
        && output.len() == 32
        && output.iter().all(|b| *b == 0)
}

/// An EVM write built, simulated and checked, not yet signed: what it will sign and what it
/// does to its wallet.
#[derive(Debug)]
pub struct Prepared {
    chain: Chain,
    client: EvmClient,
    wallet: DelegatedWallet,
    from: Address,
    /// The transaction, its nonce still to be set.
    tx: TxEip1559,
    /// The record, its key, nonce, hash and payload still to be set.
    pub(crate) record: NewTransaction,
    /// What the simulation says it does.
    pub effects: Foreseen,
    /// Whether the wallet held an allowance for the contract it calls, on a watched token,
    /// before the call.
    pub holds_allowance: bool,
    /// Why a limited key's contract call changes state no effect speaks for, if it does.
    pub unexplained: Option<String>,
}

impl Prepared {
    /// The most its fee may cost: its gas limit at its maximum fee per gas.
    pub fn fee(&self) -> super::Fee {
        super::Fee {
            max: U256::from(self.tx.gas_limit).saturating_mul(U256::from(self.tx.max_fee_per_gas)),
            units: self.tx.gas_limit,
        }
    }
}

impl EvmPipeline {
    /// A pipeline signing with `signer`, claiming keys with `idempotency`, noting broadcasts
    /// in `broadcasts` and handing refused records to `recovery`.
    pub fn new(
        store: Store,
        signer: Arc<dyn Signer>,
        clients: Arc<EvmClients>,
        broadcasts: BroadcastLog,
        idempotency: Idempotency,
        recovery: EvmRecovery,
    ) -> Self {
        Self {
            store,
            signer,
            clients,
            broadcasts,
            idempotency,
            recovery,
            lanes: Arc::default(),
        }
    }

    /// The client of `chain`.
    pub fn client(&self, chain: &Chain) -> Result<EvmClient> {
        Ok(self.clients.get(chain)?)
    }

    /// Prepares `intent` from `wallet` on `chain`: checks funds and code, estimates gas, then
    /// simulates the transaction with the gas and fees it will be signed with. `watch`: the
    /// tokens whose balance (besides the coin's) is read around it, for a limited key.
    /// Nothing is signed or stored.
    pub async fn prepare(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        intent: EvmIntent,
        watch: Option<&[Address]>,
    ) -> Result<Prepared> {
        let client = self.client(chain)?;
        let w = wallet.wallet();
        let WalletAddress::Evm(from) = w.address else {
            return Err(WalletOpsError::invalid(
                "from",
                format!("{} is not an EVM wallet", w.address),
            ));
        };
        callee_has_code(&client, chain, &intent).await?;
        let (fees, gas, balance) = funded(&client, &w.address, from, &intent).await?;
        let signing = Signing {
            from,
            to: intent.to,
            value: intent.value,
            input: &intent.input,
            gas,
            fees,
        };
        let Foresight {
            output,
            effects,
            holds_allowance,
            unexplained,
        } = foresee(&client, chain, signing, &intent, watch).await?;
        if refused_by_token(&intent, &output) {
            return Err(WalletOpsError::SendFailed(format!(
                "the transaction would do nothing: token {} answers false to this {}",
                intent.to.to_checksum(None),
                if intent.kind == TxKind::Approve {
                    "approval"
                } else {
                    "transfer"
                }
            )));
        }
        // A limited key's write from a guarded wallet runs through the guard, with checks.
        let wrapped = match (watch, effects.known()) {
            (Some(watch), Some(known))
                if self.store.wallet_guard(w.id, chain.slug()).await?.is_some() =>
            {
                let terms = ((known, watch), fees, balance);
                Some(guarded::wrap(&client, chain, (from, &intent), terms).await?)
            }
            _ => None,
        };
        let guarded = wrapped.is_some();
        let (to, value, input, gas) = match wrapped {
            Some(w) => (from, U256::ZERO, w.input, w.gas),
            None => (intent.to, intent.value, intent.input.clone(), gas),
        };
        let chain_id = evm_chain_id(chain)?;
        Ok(Prepared {
            chain: chain.clone(),
            client,
            wallet: wallet.clone(),
            from,
            tx: TxEip1559 {
                chain_id,
                nonce: 0,
                gas_limit: gas,
                max_fee_per_gas: fees.max_fee_per_gas,
                max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
                to: call_to(to),
                value,
                access_list: Default::default(),
                input,
            },
            record: intent.into_record(w, chain, guarded),
            effects,
            holds_allowance,
            unexplained,
        })
    }

    /// Signs `prepared` under `ticket` (claiming its key, with what it reserves) and stores
    /// it in its wallet's lane, then broadcasts it.
    pub async fn execute(&self, prepared: Prepared, ticket: &Ticket) -> Result<Submission> {
        let Prepared {
            chain,
            client,
            wallet,
            from,
            tx,
            mut record,
            effects: _,
            holds_allowance: _,
            unexplained: _,
        } = prepared;
        let floor = self.nonce_floor(&chain, &client, from).await?;
        self.signer.prepare(&wallet).await?;
        record.idempotency_key = Some(ticket.claim.key);
        record.held_until = Some(self.broadcasts.hold_until());
        let draft = Draft {
            chain: chain.clone(),
            client: client.clone(),
            wallet: wallet.clone(),
            tx,
            floor,
            from,
            record,
            claim: ticket.claim.clone(),
        };
        let (open, outcome) = self.sign_in_lane(draft).await?;
        note_claimed(ticket, open.id, &chain.submission_of(&open));
        self.first_broadcast(&chain, &wallet, &client, open, outcome)
            .await
    }

    /// The chain's pending nonce for a wallet the ledger has no row for yet (its first
    /// send through the service); `None` once the ledger knows it.
    async fn nonce_floor(
        &self,
        chain: &Chain,
        client: &EvmClient,
        from: Address,
    ) -> Result<Option<u64>> {
        let key = (chain.chain_id(), from);
        if self.lanes.known(&key) {
            return Ok(None);
        }
        if self.store.has_nonce_row(chain.chain_id(), from).await? {
            self.lanes.learn(key);
            return Ok(None);
        }
        Ok(Some(client.pending_nonce(from).await?))
    }
}

/// The fees and gas `intent` from `from` is signed with, and the wallet's coin balance,
/// once the wallet (`address`) is found to hold what it moves and the most it may pay.
async fn funded(
    client: &EvmClient,
    address: &WalletAddress,
    from: Address,
    intent: &EvmIntent,
) -> Result<(Fees, u64, U256)> {
    if let Some((token, amount)) = intent.token_debit {
        let held = client.token_balance(token, from).await?;
        if let Some(held) = held
            && held < amount
        {
            return Err(WalletOpsError::InsufficientFunds(format!(
                "wallet {} holds {held} of token {token}, less than {amount}",
                address
            )));
        }
    }
    let fees = client.fees().await?;
    // The balance is checked here, not left to the simulation: nodes short-cut the
    // estimate of a plain transfer (anvil answers 21000 whatever the sender holds), and
    // the headroom below must be affordable too. The two go out in one batch.
    let (estimated, balance) = tokio::join!(
        client.estimate_gas(from, intent.to, intent.value, &intent.input, fees),
        client.balance(from),
    );
    let (estimated, balance) = (estimated?, balance?);
    // Contract calls get headroom: state can move between simulation and inclusion.
    let gas = if intent.input.is_empty() {
        estimated.max(TRANSFER_GAS)
    } else {
        estimated.saturating_add(estimated / 5)
    };
    let cost = intent
        .value
        .saturating_add(U256::from(gas).saturating_mul(U256::from(fees.max_fee_per_gas)));
    if balance < cost {
        return Err(WalletOpsError::InsufficientFunds(format!(
            "wallet {} holds {balance} wei, less than value plus maximum fee ({cost} wei)",
            address
        )));
    }
    Ok((fees, gas, balance))
}
