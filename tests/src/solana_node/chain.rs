//! The ledger behind the node: a litesvm bank plus what a real node keeps beside its bank
//! (slot and block height, a queue of recent blockhashes, the status cache of processed
//! transactions and a faucet).

use std::collections::{HashMap, VecDeque};

use litesvm::{
    LiteSVM,
    types::{FailedTransactionMetadata, SimulatedTransactionInfo, TransactionMetadata},
};
use solana_account::AccountSharedData;
use solana_account_decoder::parse_nonce::{UiNonceState, parse_nonce};
use solana_clock::Clock;
use solana_epoch_schedule::EpochSchedule;
use solana_hash::Hash;
use solana_keypair::Keypair;
use solana_message::{Message, VersionedMessage};
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::{TransactionError, versioned::VersionedTransaction};
use solana_transaction_status_client_types::TransactionTokenBalance;

use super::encoding;

/// Blocks a blockhash stays usable for after the block that produced it, as on the real
/// cluster (`MAX_PROCESSING_AGE`).
pub(crate) const MAX_PROCESSING_AGE: u64 = 150;

/// Lamports per SOL.
const LAMPORTS_PER_SOL: u64 = 1_000_000_000;

/// What the faucet behind `requestAirdrop` starts with: most of the 1M SOL litesvm mints at
/// genesis.
const FAUCET_LAMPORTS: u64 = 900_000 * LAMPORTS_PER_SOL;

/// Blockhashes older than this many blocks are forgotten: they are long invalid.
const BLOCKHASH_QUEUE_BLOCKS: u64 = 2 * MAX_PROCESSING_AGE;

/// A transaction that landed in a block, with what `getSignatureStatuses` and
/// `getTransaction` report about it.
pub(crate) struct Landed {
    pub(crate) slot: u64,
    pub(crate) transaction: VersionedTransaction,
    pub(crate) err: Option<TransactionError>,
    pub(crate) meta: TransactionMetadata,
    pub(crate) pre_balances: Vec<u64>,
    pub(crate) post_balances: Vec<u64>,
    pub(crate) pre_token_balances: Vec<TransactionTokenBalance>,
    pub(crate) post_token_balances: Vec<TransactionTokenBalance>,
    /// Unix time the block was produced at.
    pub(crate) block_time: i64,
}

/// A simulation's outcome.
pub(crate) struct Simulated {
    pub(crate) err: Option<TransactionError>,
    pub(crate) meta: TransactionMetadata,
    /// The accounts the transaction would have written, as it would have left them.
    pub(crate) post_accounts: Vec<(Pubkey, AccountSharedData)>,
}

impl From<Result<SimulatedTransactionInfo, FailedTransactionMetadata>> for Simulated {
    fn from(outcome: Result<SimulatedTransactionInfo, FailedTransactionMetadata>) -> Self {
        match outcome {
            Ok(info) => Self {
                err: None,
                meta: info.meta,
                post_accounts: info.post_accounts,
            },
            Err(failed) => Self {
                err: Some(failed.err),
                meta: failed.meta,
                post_accounts: Vec::new(),
            },
        }
    }
}

/// The node's state. Every transaction that lands gets a block of its own, so slots and
/// block height move with every landed transaction, and a new blockhash is produced per
/// block.
pub(crate) struct Chain {
    pub(crate) svm: LiteSVM,
    slot: u64,
    block_height: u64,
    genesis_hash: Hash,
    /// Recent blockhashes, oldest first, with the block height of the block that produced
    /// them. litesvm itself only accepts its latest blockhash, so its own check is off and
    /// the age check happens here, over the whole queue, as a real bank does.
    blockhashes: VecDeque<(Hash, u64)>,
    landed: HashMap<Signature, Landed>,
    transaction_count: u64,
    /// How many of the next `sendTransaction` calls are accepted and then lost.
    pub(crate) drop_next: u64,
    /// The errors the next `sendTransaction` calls are answered with, in turn (`unhealthy`:
    /// not taken; `refusal`: processed all the same; `rejected`: a preflight failure, not
    /// taken).
    pub(crate) fault_next: VecDeque<String>,
    /// The prices `getRecentPrioritizationFees` reports, one per recent slot, oldest first.
    pub(crate) recent_fees: Vec<u64>,
    /// What the leader includes (`fees`).
    pub(crate) congestion: super::fees::Congestion,
    faucet: Keypair,
}

impl Chain {
    /// A fresh ledger: litesvm with its builtins, SPL Token, Token-2022 and the associated
    /// token account program, and a funded faucet.
    pub(crate) fn new(genesis_hash: Hash) -> anyhow::Result<Self> {
        let mut svm = LiteSVM::new().with_blockhash_check(false);
        let faucet = Keypair::new();
        // Genesis funding of the faucet; every later transfer is a real transaction.
        svm.airdrop(&faucet.pubkey(), FAUCET_LAMPORTS)
            .map_err(|e| anyhow::anyhow!("cannot fund the faucet: {:?}", e.err))?;
        let slot = svm.get_sysvar::<Clock>().slot;
        let mut chain = Self {
            svm,
            slot,
            // A real cluster skips some slots, so its block height trails the slot; keeping
            // them apart catches code that mixes the two up.
            block_height: slot - slot / 10,
            genesis_hash,
            blockhashes: VecDeque::new(),
            landed: HashMap::new(),
            transaction_count: 0,
            drop_next: 0,
            fault_next: VecDeque::new(),
            recent_fees: Vec::new(),
            congestion: super::fees::Congestion::default(),
            faucet,
        };
        chain.sync_clock();
        let first = chain.svm.latest_blockhash();
        chain.blockhashes.push_back((first, chain.block_height));
        Ok(chain)
    }

    pub(crate) fn slot(&self) -> u64 {
        self.slot
    }

    pub(crate) fn block_height(&self) -> u64 {
        self.block_height
    }

    pub(crate) fn genesis_hash(&self) -> Hash {
        self.genesis_hash
    }

    pub(crate) fn transaction_count(&self) -> u64 {
        self.transaction_count
    }

    /// The newest blockhash and the last block height at which it is still valid.
    pub(crate) fn latest_blockhash(&self) -> (Hash, u64) {
        match self.blockhashes.back() {
            Some((hash, height)) => (*hash, height + MAX_PROCESSING_AGE),
            None => (self.svm.latest_blockhash(), self.block_height),
        }
    }

    /// Whether a transaction with this blockhash would be accepted into the next block.
    pub(crate) fn is_blockhash_valid(&self, hash: &Hash) -> bool {
        self.blockhashes
            .iter()
            .any(|(h, height)| h == hash && height + MAX_PROCESSING_AGE > self.block_height)
    }

    /// The age check a bank applies before it runs a transaction: a recent blockhash, or a
    /// durable nonce whose account holds that blockhash.
    pub(crate) fn check_age(&self, tx: &VersionedTransaction) -> Result<(), TransactionError> {
        let blockhash = tx.message.recent_blockhash();
        if self.is_blockhash_valid(blockhash) || self.nonce_matches(tx, blockhash) {
            Ok(())
        } else {
            Err(TransactionError::BlockhashNotFound)
        }
    }

    fn nonce_matches(&self, tx: &VersionedTransaction, blockhash: &Hash) -> bool {
        if !tx.uses_durable_nonce() {
            return false;
        }
        let keys = tx.message.static_account_keys();
        let nonce_account = tx
            .message
            .instructions()
            .first()
            .and_then(|ix| ix.accounts.first())
            .and_then(|index| keys.get(usize::from(*index)));
        let Some(account) = nonce_account.and_then(|key| self.svm.get_account(key)) else {
            return false;
        };
        matches!(
            parse_nonce(&account.data),
            Ok(UiNonceState::Initialized(data)) if data.blockhash == blockhash.to_string()
        )
    }

    /// The landed transaction with this signature.
    pub(crate) fn landed(&self, signature: &Signature) -> Option<&Landed> {
        self.landed.get(signature)
    }

    /// The landed transactions whose account keys name `address`.
    pub(crate) fn landed_naming(&self, address: &Pubkey) -> Vec<(Signature, &Landed)> {
        self.landed
            .iter()
            .filter(|(_, l)| {
                l.transaction
                    .message
                    .static_account_keys()
                    .contains(address)
            })
            .map(|(s, l)| (*s, l))
            .collect()
    }

    /// Runs a transaction in a new block, as the leader would. `Ok` when it landed (its
    /// status may still carry an error: a failed transaction that paid its fee is recorded
    /// like on the real cluster); `Err` when no block would include it, so it is never
    /// seen.
    pub(crate) fn process(
        &mut self,
        tx: VersionedTransaction,
    ) -> Result<Signature, TransactionError> {
        let Some(signature) = tx.signatures.first().copied() else {
            return Err(TransactionError::SanitizeFailure);
        };
        if self.landed.contains_key(&signature) {
            return Err(TransactionError::AlreadyProcessed);
        }
        self.check_age(&tx)?;
        let keys = tx.message.static_account_keys().to_vec();
        let pre_balances = self.balances(&keys);
        let pre_token_balances = encoding::token_balances(self, &keys);
        self.begin_block();
        let result = self.svm.send_transaction(tx.clone());
        let (err, meta) = match result {
            Ok(meta) => (None, meta),
            // litesvm keeps a failed transaction in its history exactly when it was
            // included and charged its fee.
            Err(failed) if self.svm.get_transaction(&signature).is_some() => {
                (Some(failed.err), failed.meta)
            }
            Err(failed) => {
                self.end_block();
                return Err(failed.err);
            }
        };
        let post_balances = self.balances(&keys);
        let post_token_balances = encoding::token_balances(self, &keys);
        self.transaction_count += 1;
        self.landed.insert(
            signature,
            Landed {
                slot: self.slot,
                transaction: tx,
                err,
                meta,
                pre_balances,
                post_balances,
                pre_token_balances,
                post_token_balances,
                block_time: self.svm.get_sysvar::<Clock>().unix_timestamp,
            },
        );
        self.end_block();
        Ok(signature)
    }

    /// Sends `lamports` from the faucet to `to` in a real, signed system transfer.
    pub(crate) fn airdrop(
        &mut self,
        to: &Pubkey,
        lamports: u64,
    ) -> Result<Signature, TransactionError> {
        let (blockhash, _) = self.latest_blockhash();
        let ix =
            solana_system_interface::instruction::transfer(&self.faucet.pubkey(), to, lamports);
        let message = Message::new_with_blockhash(&[ix], Some(&self.faucet.pubkey()), &blockhash);
        let tx = VersionedTransaction::try_new(VersionedMessage::Legacy(message), &[&self.faucet])
            .map_err(|_| TransactionError::SignatureFailure)?;
        self.process(tx)
    }

    /// Moves the chain past the validity window of every blockhash handed out so far, as if
    /// `MAX_PROCESSING_AGE` empty blocks had been produced.
    pub(crate) fn expire_blockhashes(&mut self) {
        self.slot += MAX_PROCESSING_AGE;
        self.block_height += MAX_PROCESSING_AGE;
        self.begin_block();
        self.end_block();
    }

    /// Runs a transaction against the current state without committing anything, after the
    /// same age check `process` applies. Without `verify_signatures` unsigned transactions
    /// simulate too (simulations with `sigVerify: false`, fee estimates).
    pub(crate) fn simulate(
        &mut self,
        tx: VersionedTransaction,
        verify_signatures: bool,
    ) -> Simulated {
        if let Err(err) = self.check_age(&tx) {
            return Simulated {
                err: Some(err),
                meta: TransactionMetadata::default(),
                post_accounts: Vec::new(),
            };
        }
        if verify_signatures {
            Simulated::from(self.svm.simulate_transaction(tx))
        } else {
            self.without_sigverify(|svm| Simulated::from(svm.simulate_transaction(tx)))
        }
    }

    /// `simulate`, with the balances of the transaction's static accounts before and after
    /// it when it succeeds, as a current node answers them.
    pub(crate) fn simulate_with_balances(
        &mut self,
        tx: VersionedTransaction,
        verify_signatures: bool,
    ) -> (Simulated, Option<encoding::SimulatedBalances>) {
        let keys = tx.message.static_account_keys().to_vec();
        let pre = self.balances(&keys);
        let pre_tokens = encoding::token_balances(self, &keys);
        let simulated = self.simulate(tx, verify_signatures);
        let after = |key: &Pubkey| match simulated
            .post_accounts
            .iter()
            .find(|(address, _)| address == key)
        {
            Some((_, account)) => Some(solana_account::Account::from(account.clone())),
            None => self.svm.get_account(key),
        };
        let balances = simulated
            .err
            .is_none()
            .then(|| encoding::SimulatedBalances {
                pre,
                post: keys
                    .iter()
                    .map(|key| after(key).map_or(0, |a| a.lamports))
                    .collect(),
                pre_tokens,
                post_tokens: encoding::token_balances_of(self, &keys, after),
            });
        (simulated, balances)
    }

    /// Runs `f` on the bank with signature verification off.
    fn without_sigverify<R>(&mut self, f: impl FnOnce(&LiteSVM) -> R) -> R {
        let svm = std::mem::take(&mut self.svm).with_sigverify(false);
        let result = f(&svm);
        self.svm = svm.with_sigverify(true);
        result
    }

    fn balances(&self, keys: &[Pubkey]) -> Vec<u64> {
        keys.iter()
            .map(|key| self.svm.get_balance(key).unwrap_or(0))
            .collect()
    }

    /// Opens the next block.
    fn begin_block(&mut self) {
        self.slot += 1;
        self.block_height += 1;
        self.sync_clock();
    }

    /// Programs see the current slot, its epoch and the wall-clock time in `Clock`.
    fn sync_clock(&mut self) {
        let schedule = self.svm.get_sysvar::<EpochSchedule>();
        let mut clock = self.svm.get_sysvar::<Clock>();
        clock.slot = self.slot;
        clock.epoch = schedule.get_epoch(self.slot);
        clock.leader_schedule_epoch = schedule.get_leader_schedule_epoch(self.slot);
        clock.unix_timestamp = unix_now();
        self.svm.set_sysvar(&clock);
    }

    /// Registers the block's blockhash and forgets blockhashes long out of the window.
    fn end_block(&mut self) {
        // litesvm derives its next blockhash from the previous one; that is the new
        // block's hash.
        self.svm.expire_blockhash();
        self.blockhashes
            .push_back((self.svm.latest_blockhash(), self.block_height));
        while self
            .blockhashes
            .front()
            .is_some_and(|(_, height)| height + BLOCKHASH_QUEUE_BLOCKS < self.block_height)
        {
            self.blockhashes.pop_front();
        }
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
