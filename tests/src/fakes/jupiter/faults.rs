//! The fake's failures on request, and the instructions a malicious route adds to the swaps
//! it builds.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, PoisonError},
};

use solana_pubkey::Pubkey;
use solana_transaction::Instruction;
use spl_associated_token_account_interface::address::get_associated_token_address_with_program_id;

use super::{JupError, Venue};

/// What a malicious route adds to the swaps it builds, each toward `STRANGER`, each
/// allowed by the wallet's signature on the whole transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// A System transfer of 1,000,000 lamports from the wallet (rent-exempt for a new account).
    SolTransfer,
    /// A transfer of 1 base unit from the wallet's token account.
    TokenTransfer,
    /// A delegation of 1,000 base units of the wallet's token account.
    Approve,
    /// The wallet's token account handed over (`SetAuthority` AccountOwner).
    SetOwner,
    /// The wallet's token account closed to the stranger (it must be empty to close).
    Close,
    /// The wallet itself assigned to another program.
    Assign,
    /// A 10 MiB account owned by the stranger (as its program) created with the wallet's
    /// lamports (`CreateAccountWithSeed`, the wallet as base, so only its signature is
    /// needed): ~73 SOL of rent the stranger can take back by closing it.
    FundAccount,
}

/// The size of the account `Extra::FundAccount` creates.
const FUNDED_SPACE: u64 = 10 * 1024 * 1024;

/// Who a malicious route pays.
pub const STRANGER: Pubkey = Pubkey::new_from_array([7; 32]);

/// An address a key holds (on the curve), which `input_to_key` sends what is sold to.
pub(super) fn key_holder() -> Pubkey {
    use solana_signer::Signer as _;
    solana_keypair::Keypair::new_from_array([9; 32]).pubkey()
}

/// Failures the fake shows on request. Shared: every clone switches the same fake.
#[derive(Debug, Clone, Default)]
pub struct JupiterFaults(Arc<Mutex<FaultState>>);

#[derive(Debug, Default)]
pub(super) struct FaultState {
    /// What every swap built adds after its legs.
    pub(super) extra: Option<Extra>,
    pub(super) untradable: HashSet<Pubkey>,
    pub(super) no_route: bool,
    /// Quotes answer an `otherAmountThreshold` of 0.
    pub(super) zero_threshold: bool,
    /// SOL sold goes to `STRANGER`, and 1 base unit of the token comes back.
    pub(super) divert: bool,
    /// What is sold goes to an account a key holds (`key_holder`), not to the vault; the
    /// wallet is paid in full.
    pub(super) input_to_key: bool,
    pub(super) fail: u32,
    pub(super) stall: u32,
    pub(super) requests: u64,
}

impl JupiterFaults {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Quotes and swaps with `mint` on either side answer 400 `TOKEN_NOT_TRADABLE`.
    pub fn not_tradable(&self, mint: Pubkey) {
        self.lock().untradable.insert(mint);
    }

    /// Every quote and swap answers 400 `COULD_NOT_FIND_ANY_ROUTE` while `on`.
    pub fn no_route(&self, on: bool) {
        self.lock().no_route = on;
    }

    /// The next `count` requests answer HTTP 500.
    pub fn fail_next(&self, count: u32) {
        self.lock().fail = count;
    }

    /// The next `count` requests get no answer for a minute.
    pub fn stall_next(&self, count: u32) {
        self.lock().stall = count;
    }

    /// Quotes answer an `otherAmountThreshold` of 0 while `on`: a route built from one
    /// would take any price.
    pub fn zero_threshold(&self, on: bool) {
        self.lock().zero_threshold = on;
    }

    /// Swaps selling SOL send it to `STRANGER` and pay 1 base unit of the token while `on`.
    pub fn divert_input(&self, on: bool) {
        self.lock().divert = on;
    }

    /// Sends what is sold to an account a key holds rather than to the pool's vault, paying
    /// the wallet in full: a route whose input no program guards.
    pub fn input_to_key(&self, on: bool) {
        self.lock().input_to_key = on;
    }

    /// Every swap built adds `extra` after its legs.
    pub fn add_to_swaps(&self, extra: Extra) {
        self.lock().extra = Some(extra);
    }

    /// Clears every switch.
    pub fn clear(&self) {
        let mut state = self.lock();
        state.extra = None;
        state.untradable.clear();
        state.no_route = false;
        state.zero_threshold = false;
        state.divert = false;
        state.input_to_key = false;
        state.fail = 0;
        state.stall = 0;
    }

    /// How many requests arrived so far, faulted ones included.
    pub fn requests(&self) -> u64 {
        self.lock().requests
    }
}

impl Venue {
    /// The instruction a malicious route adds for `user`.
    pub(super) fn extra(&self, user: &Pubkey, extra: Extra) -> Result<Instruction, JupError> {
        use spl_token_2022_interface::instruction as token;
        let program = &self.token_program;
        let tokens = get_associated_token_address_with_program_id(user, &self.mint, program);
        let built = match extra {
            Extra::SolTransfer => Ok(solana_system_interface::instruction::transfer(
                user, &STRANGER, 1_000_000,
            )),
            Extra::TokenTransfer => token::transfer_checked(
                program,
                &tokens,
                &self.mint,
                &self.pool_token_account(),
                user,
                &[],
                1,
                self.decimals,
            ),
            Extra::Approve => token::approve(program, &tokens, &STRANGER, user, &[], 1_000),
            Extra::SetOwner => token::set_authority(
                program,
                &tokens,
                Some(&STRANGER),
                token::AuthorityType::AccountOwner,
                user,
                &[],
            ),
            Extra::Close => token::close_account(program, &tokens, &STRANGER, user, &[]),
            Extra::Assign => Ok(solana_system_interface::instruction::assign(
                user, &STRANGER,
            )),
            Extra::FundAccount => {
                let seed = "walletops-route";
                let funded = Pubkey::create_with_seed(user, seed, &STRANGER)
                    .map_err(|e| JupError::internal(e.to_string()))?;
                // The default rent: 3,480 lamports per byte-year, two years, 128 bytes of
                // account overhead.
                let rent = (FUNDED_SPACE + 128) * 3_480 * 2;
                Ok(
                    solana_system_interface::instruction::create_account_with_seed(
                        user,
                        &funded,
                        user,
                        seed,
                        rent,
                        FUNDED_SPACE,
                        &STRANGER,
                    ),
                )
            }
        };
        built.map_err(|e| JupError::internal(e.to_string()))
    }
}
