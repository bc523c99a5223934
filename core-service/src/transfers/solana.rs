//! The Solana write pipeline: SOL transfers and SPL `transfer_checked` (creating the
//! recipient's associated token account idempotently, paid by the sender), through the same
//! exactly-once frame as EVM: funds checked before signing, the signed transaction and its
//! signature stored (with the idempotency claim) before it is sent.
//!
//! **Invariant:** a transfer is re-signed with a new blockhash only when its blockhash has
//! expired (the block height is past its last valid height) and its signature was never
//! seen: only then can the old bytes never be processed.

use std::sync::Arc;

use solana_hash::Hash;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_transaction::{Transaction, versioned::VersionedTransaction};
use spl_associated_token_account_interface::address::get_associated_token_address_with_program_id;
use uuid::Uuid;

use super::{BroadcastLog, handed_over};
use crate::{
    error::{Result, WalletOpsError},
    idempotency::{Idempotency, Ticket},
    recovery::solana::{SolanaRecovery, decode, encode, held_by_node},
    signer::Signer,
};
use alloy::primitives::U256;
use solana_message::VersionedMessage;
use solana_signature::Signature;
use walletops_chains::{
    Chain, MAX_UNITS, SolanaFees,
    effects::Foreseen,
    solana::{MintInfo, SendOutcome, SolanaClient, SolanaClients},
    with_budget, writable,
};
use walletops_domain::{
    DelegatedWallet, OpenTransaction, Submission, TxKind, TxStatus, WalletAddress,
};
use walletops_store::{NewTransaction, Store};

/// What a Solana send moves, parsed and ready: one leg, or several of one asset (a payout's
/// items packed in one transaction).
#[derive(Debug, Clone)]
pub struct SolanaIntent {
    /// Each recipient (the owner, for SPL) and its lamports or token base units.
    pub legs: Vec<Leg>,
    /// The mint, for SPL; `None`: SOL.
    pub mint: Option<Pubkey>,
    /// The request as received, kept with the record for audit.
    pub request: serde_json::Value,
}

pub use crate::requests::payouts::Leg;

impl SolanaIntent {
    /// What all its legs move together.
    fn total(&self) -> u64 {
        self.legs
            .iter()
            .fold(0u64, |sum, leg| sum.saturating_add(leg.amount))
    }
}

/// What a Solana write signs.
#[derive(Debug)]
pub(crate) enum Unsigned {
    /// A legacy message the service built, to sign with this blockhash.
    Message(Message, Hash),
    /// A transaction an aggregator built, paid by the wallet, its other signatures in place
    /// (checked by the swap guard).
    Built(VersionedTransaction),
}

/// A Solana write built and checked, not yet signed: what it will sign and what it does to
/// its wallet.
#[derive(Debug)]
pub struct Prepared {
    pub(crate) chain: Chain,
    pub(crate) wallet: DelegatedWallet,
    pub(crate) unsigned: Unsigned,
    /// The record, its key, hash and payload still to be set.
    pub(crate) record: NewTransaction,
    /// What it does.
    pub effects: Foreseen,
    /// What its fee may cost.
    pub(crate) fee: super::Fee,
}

/// The Solana pipeline.
#[derive(Debug, Clone)]
pub struct SolanaPipeline {
    store: Store,
    signer: Arc<dyn Signer>,
    clients: Arc<SolanaClients>,
    broadcasts: BroadcastLog,
    idempotency: Idempotency,
    recovery: SolanaRecovery,
}

impl SolanaPipeline {
    /// A pipeline signing with `signer`, claiming keys with `idempotency`, noting sends in
    /// `broadcasts` and ending refused records through `recovery`.
    pub fn new(
        store: Store,
        signer: Arc<dyn Signer>,
        clients: Arc<SolanaClients>,
        broadcasts: BroadcastLog,
        idempotency: Idempotency,
        recovery: SolanaRecovery,
    ) -> Self {
        Self {
            store,
            signer,
            clients,
            broadcasts,
            idempotency,
            recovery,
        }
    }

    /// The client of `chain`.
    pub fn client(&self, chain: &Chain) -> SolanaClient {
        self.clients.get(chain)
    }

    /// The lamports `payees`' new token accounts of `mint` (whose program `info` names)
    /// take as rent, the sender paying: each payee without its associated account, once.
    pub async fn rent_for(
        &self,
        client: &SolanaClient,
        mint: Pubkey,
        info: &MintInfo,
        payees: &[Pubkey],
    ) -> Result<u64> {
        let mut accounts: Vec<Pubkey> = payees
            .iter()
            .map(|to| get_associated_token_address_with_program_id(to, &mint, &info.program))
            .collect();
        accounts.sort_unstable();
        accounts.dedup();
        let new = client.missing(&accounts).await?;
        if new == 0 {
            return Ok(0);
        }
        Ok(client
            .rent_exempt(token_account_len(&info.program)?)
            .await?
            .saturating_mul(new))
    }

    /// The instructions of `intent`'s token transfers of `mint` from `from` (the wallet at
    /// `address`), and the rent its payees' new token accounts take: the mint read, the
    /// wallet's holding of it checked against the total.
    async fn spl_instructions(
        &self,
        client: &SolanaClient,
        chain: &Chain,
        (from, address): (&Pubkey, &WalletAddress),
        mint: Pubkey,
        intent: &SolanaIntent,
    ) -> Result<(Vec<solana_message::Instruction>, u64)> {
        let total = intent.total();
        let info = client
            .mints(&[mint])
            .await?
            .into_iter()
            .next()
            .flatten()
            .ok_or_else(|| {
                WalletOpsError::invalid(
                    "token",
                    format!(
                        "{mint} is not an SPL Token or Token-2022 mint on {}",
                        chain.slug()
                    ),
                )
            })?;
        let held = client
            .holdings(from)
            .await?
            .into_iter()
            .find(|h| h.mint == mint)
            .map_or(0, |h| h.amount);
        if held < total {
            return Err(WalletOpsError::InsufficientFunds(format!(
                "wallet {address} holds {held} of {mint}, less than {total}"
            )));
        }
        // A new recipient account is paid by the sender: it needs its rent too.
        let payees: Vec<Pubkey> = intent.legs.iter().map(|l| l.to).collect();
        let rent = self.rent_for(client, mint, &info, &payees).await?;
        let spl = super::packs::Spl {
            mint,
            program: info.program,
            decimals: info.decimals,
        };
        Ok((
            super::packs::instructions(from, Some(spl), &intent.legs)?,
            rent,
        ))
    }

    /// Prepares `intent` from `wallet` on `chain`: builds the transfer and checks the funds
    /// it needs. Nothing is signed or stored.
    pub async fn prepare(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        intent: SolanaIntent,
    ) -> Result<Prepared> {
        let client = self.client(chain);
        let w = wallet.wallet();
        let WalletAddress::Solana(from) = w.address else {
            return Err(WalletOpsError::invalid(
                "from",
                format!("{} is not a Solana wallet", w.address),
            ));
        };
        let id = Uuid::now_v7();
        let total = intent.total();
        let (mut instructions, rent) = match intent.mint {
            None => (super::packs::instructions(&from, None, &intent.legs)?, 0),
            Some(mint) => {
                self.spl_instructions(&client, chain, (&from, &w.address), mint, &intent)
                    .await?
            }
        };
        let token = intent.mint;
        // Signatures are deterministic: without it, two equal payments signed with one
        // blockhash (same wallet, recipient and amount, within a slot or a provider's cached
        // blockhash) would be one transaction, landing once for two records.
        instructions.push(spl_memo_interface::instruction::build_memo(
            &spl_memo_interface::v3::ID,
            id.to_string().as_bytes(),
            &[],
        ));
        let (blockhash, valid_until) = client.blockhash().await?;
        // The signature fee alone first: the wallet must hold at least that before anything
        // is simulated.
        let plain = Message::new_with_blockhash(&instructions, Some(&from), &blockhash);
        let base_fee = client
            .fee(&Transaction::new_unsigned(plain.clone()))
            .await?;
        let lamports = client.balance(&from).await?;
        let sol_out = if token.is_none() { total } else { 0 };
        let short = |fee: u64| {
            let needed = sol_out.saturating_add(fee).saturating_add(rent);
            (lamports < needed).then(|| {
                WalletOpsError::InsufficientFunds(format!(
                    "wallet {} holds {lamports} lamports, less than amount, fee and rent ({needed})",
                    w.address
                ))
            })
        };
        if let Some(refusal) = short(base_fee) {
            return Err(refusal);
        }
        let Budgeted {
            message,
            effects,
            price,
            limit,
            note,
        } = budgeted(&client, chain, &from, &instructions, (&blockhash, &plain)).await?;
        let fee = base_fee.saturating_add(SolanaFees::priority_lamports(price, limit));
        if let Some(refusal) = short(fee) {
            return Err(refusal);
        }
        let record = record(id, w, chain, intent, valid_until, &note);
        Ok(Prepared {
            chain: chain.clone(),
            wallet: wallet.clone(),
            unsigned: Unsigned::Message(message, blockhash),
            record,
            effects,
            fee: super::Fee {
                max: U256::from(fee),
                units: u64::from(limit),
            },
        })
    }

    /// Signs `prepared` for its wallet, stores it (its hash and payload set here) and claims
    /// `ticket`'s key in one database transaction, then sends it once.
    pub async fn execute(&self, prepared: Prepared, ticket: &Ticket) -> Result<Submission> {
        let Prepared {
            chain,
            wallet,
            unsigned,
            mut record,
            ..
        } = prepared;
        let (chain, wallet) = (&chain, &wallet);
        record.idempotency_key = Some(ticket.claim.key);
        self.signer.prepare(wallet).await?;
        let txn = self.store.begin().await?;
        let (tx, signature) = match unsigned {
            Unsigned::Message(message, blockhash) => {
                let (tx, signature) = self
                    .signer
                    .sign_solana_message(wallet, message, blockhash)
                    .await?;
                (VersionedTransaction::from(tx), signature)
            }
            Unsigned::Built(tx) => self.signer.sign_solana_built(wallet, tx).await?,
        };
        record.hash = signature;
        record.signed_payload = encode(&tx)?;
        record.held_until = Some(self.broadcasts.hold_until());
        let open = self.store.insert_transaction(&txn, record).await?;
        self.idempotency
            .commit_with_claim(txn, ticket, open.id, &chain.submission_of(&open))
            .await?;
        crate::metrics::write_submitted(chain.slug(), open.kind.as_str());
        fail::fail_point!("solana-before-send");
        let client = self.client(chain);
        self.first_send(chain, &client, open).await
    }

    /// Sends a freshly stored transfer once.
    ///
    /// As on EVM, once the record is stored the only error is a definite refusal that was
    /// recorded: anything else answers with the submission and leaves the record to the
    /// monitor, which still sends the stored bytes (an error would send the caller to retry
    /// with a new key, and the payment would go out twice). That includes a node that does
    /// not know the blockhash just read (a lagging backend behind a balancer, say): the
    /// transfer is re-signed only once its blockhash has expired unseen.
    async fn first_send(
        &self,
        chain: &Chain,
        client: &SolanaClient,
        open: OpenTransaction,
    ) -> Result<Submission> {
        let id = open.id;
        let outcome = match decode(&open.signed_payload) {
            Ok(tx) => client.send(&tx).await,
            Err(e) => {
                self.broadcasts.hand_over(id).await;
                return Ok(handed_over(chain, &open, &e));
            }
        };
        if outcome == SendOutcome::Accepted {
            // Taken by the node that checked it: every route gets it too (a block engine, the
            // other RPC URLs), never before that check, so a refused transfer goes nowhere.
            if let Ok(tx) = decode(&open.signed_payload) {
                let client = client.clone();
                tokio::spawn(async move { client.resend(&tx).await });
            }
            // The broadcast's note hands the record over.
            self.broadcasts.note(id);
            return Ok(chain.submission_of(&open));
        }
        let answer = self.after_send(chain, client, &open, outcome).await;
        self.broadcasts.hand_over(id).await;
        answer
    }

    /// Follows up a first send of `open` that the node did not take: the record failed for
    /// a refusal, or left to the monitor.
    async fn after_send(
        &self,
        chain: &Chain,
        client: &SolanaClient,
        open: &OpenTransaction,
        outcome: SendOutcome,
    ) -> Result<Submission> {
        let id = open.id;
        let err = match outcome {
            SendOutcome::Accepted => return Ok(chain.submission_of(open)),
            SendOutcome::Unknown(why) => {
                tracing::warn!(%id, %why, "send outcome unknown; the monitor takes over");
                return Ok(chain.submission_of(open));
            }
            SendOutcome::BlockhashExpired => {
                tracing::warn!(%id, "the node does not know the blockhash; the monitor takes over");
                return Ok(chain.submission_of(open));
            }
            SendOutcome::Rejected { why, insufficient } if insufficient => {
                WalletOpsError::InsufficientFunds(format!("the node refused the transfer: {why}"))
            }
            SendOutcome::Rejected { why, .. } => {
                WalletOpsError::SendFailed(format!("the node refused the transfer: {why}"))
            }
        };
        // Another send of it (one a gateway forwarded before it answered, say) may have
        // reached the cluster: a refusal of a transfer it holds is a duplicate's.
        match held_by_node(client, open).await {
            Ok(false) => {}
            Ok(true) => {
                tracing::warn!(%id, %err, "the node refused a transfer it holds; taken as sent");
                self.broadcasts.note(id);
                return Ok(chain.submission_of(open));
            }
            Err(e) => return Ok(handed_over(chain, open, &e)),
        }
        match self
            .recovery
            .fail(open, TxStatus::Failed, &err.to_string(), Some(&err))
            .await
        {
            Ok(true) => Err(err),
            // The request's hold ran out and the monitor took the record up: it is its to
            // finish.
            Ok(false) => Ok(chain.submission_of(open)),
            Err(e) => Ok(handed_over(chain, open, &e)),
        }
    }
}

/// A transfer's message with its compute budget, and what its simulation says it does.
struct Budgeted {
    message: Message,
    effects: Foreseen,
    /// Micro-lamports per compute unit.
    price: u64,
    /// Compute units.
    limit: u32,
    /// The budget, in words for the record's history.
    note: String,
}

/// `instructions` from `from` under `blockhash` (`plain`: their message without a budget)
/// with a compute budget: the price recent blocks took for what the transfer writes; the
/// limit from what its simulation, at the most a transaction may ask, consumed.
async fn budgeted(
    client: &SolanaClient,
    chain: &Chain,
    from: &Pubkey,
    instructions: &[solana_message::Instruction],
    (blockhash, plain): (&Hash, &Message),
) -> Result<Budgeted> {
    let fees = chain.solana_fees();
    let recent = client.priority_prices(&writable(plain)).await?;
    let (price, capped) = fees.price(recent);
    let probe = Message::new_with_blockhash(
        &with_budget(instructions, MAX_UNITS, price),
        Some(from),
        blockhash,
    );
    let (_, consumed) = client.simulate(from, &unsigned(&probe)).await?;
    let limit = consumed.map_or(MAX_UNITS, |units| fees.limit(units));
    let message = Message::new_with_blockhash(
        &with_budget(instructions, limit, price),
        Some(from),
        blockhash,
    );
    // The effects are those of the very message that is signed, its compute budget
    // included: a program cannot show the probe one thing and the signed message another.
    let (effects, _) = client.simulate(from, &unsigned(&message)).await?;
    let note = format!(
        "compute unit limit {limit}{}, price {price} micro-lamports (p{} of recent fees{})",
        consumed
            .map(|u| format!(" ({u} consumed in simulation + {}%)", fees.margin_percent))
            .unwrap_or_default(),
        fees.percentile,
        if capped {
            format!(", capped at {}", fees.max_price)
        } else {
            String::new()
        }
    );
    Ok(Budgeted {
        message,
        effects,
        price,
        limit,
        note,
    })
}

/// The record of `intent` from `w` on `chain`, signed with a blockhash valid to block height
/// `valid_until` under compute `budget`: its hash and payload are set when it is signed.
fn record(
    id: Uuid,
    w: &walletops_domain::Wallet,
    chain: &Chain,
    intent: SolanaIntent,
    valid_until: u64,
    budget: &str,
) -> NewTransaction {
    let (total, token) = (intent.total(), intent.mint);
    NewTransaction {
        id,
        user_id: w.user_id,
        wallet_id: w.id,
        chain: chain.slug().to_owned(),
        chain_id: chain.chain_id(),
        kind: TxKind::Send,
        from: w.address,
        to: intent
            .legs
            .first()
            .map(|l| l.to.to_string())
            .unwrap_or_default(),
        asset: Some(if token.is_some() { "spl" } else { "native" }.to_owned()),
        token: token.map(|t| t.to_string()),
        amount: Some(total.to_string()),
        request: intent.request,
        hash: String::new(),
        nonce: None,
        signed_payload: Vec::new(),
        idempotency_key: None,
        note: Some(match intent.legs.len() {
            1 => format!("signed with a blockhash valid to block height {valid_until}; {budget}"),
            n => format!(
                "pays {n} recipients; signed with a blockhash valid to block height {valid_until}; {budget}"
            ),
        }),
        valid_until: Some(valid_until),
        held_until: None,
        simulated_effects: None,
        guarded: false,
    }
}

/// `message` as a transaction to simulate, its signatures not in place.
fn unsigned(message: &Message) -> VersionedTransaction {
    VersionedTransaction {
        signatures: vec![Signature::default(); usize::from(message.header.num_required_signatures)],
        message: VersionedMessage::Legacy(message.clone()),
    }
}

/// The size of an associated token account of `program` (Token-2022's carry the
/// ImmutableOwner extension).
fn token_account_len(program: &Pubkey) -> Result<usize> {
    use spl_token_2022_interface::extension::ExtensionType;
    let extensions: &[ExtensionType] = if *program == spl_token_2022_interface::ID {
        &[ExtensionType::ImmutableOwner]
    } else {
        &[]
    };
    ExtensionType::try_calculate_account_len::<spl_token_2022_interface::state::Account>(extensions)
        .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("account size: {e}")))
}
