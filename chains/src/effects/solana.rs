//! A Solana transaction's effects on its wallet, read from the instructions it executes: the
//! top-level ones and the inner (CPI) ones `simulateTransaction` returns with
//! `innerInstructions`, in either wire form (compiled bytes, or agave's `jsonParsed`).
//!
//! Only the System program can debit a System-owned wallet's lamports, and only SPL Token or
//! Token-2022 a token account: every move of the wallet's assets is one of their
//! instructions. So an instruction of theirs that names the wallet's accounts and is not
//! understood makes the effects unreadable instead of being skipped, and any other
//! program's instruction is harmless in itself (its moves are its CPIs into those).

use std::collections::HashMap;

use alloy::primitives::U256;
use solana_pubkey::Pubkey;
use walletops_domain::{Asset, Effects, Flow, Grant, GrantKind, WalletAddress};

mod decode;
pub use decode::{op_of, op_of_parsed};

const SYSTEM: Pubkey = solana_system_interface::program::ID;
const TOKEN: Pubkey = spl_token_interface::ID;
const TOKEN_2022: Pubkey = spl_token_2022_interface::ID;

/// The wrapped SOL mint: its tokens are lamports, and the aggregators name SOL by it.
pub const WRAPPED_SOL: Pubkey = spl_token_interface::native_mint::ID;

/// SPL `AuthorityType::AccountOwner`: who may move a token account's tokens and close it.
const ACCOUNT_OWNER: u8 = 2;
/// SPL `AuthorityType::CloseAccount`: who may close it (and take its lamports).
const CLOSE_ACCOUNT: u8 = 3;

/// A token account's state as read before the transaction (SPL Token or Token-2022).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenAccount {
    /// The mint of its tokens.
    pub mint: Pubkey,
    /// Who may move them.
    pub owner: Pubkey,
}

/// One executed instruction, normalized from either wire form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// System `Transfer`: `lamports` from `from` to `to`.
    SystemTransfer {
        /// The funding account.
        from: Pubkey,
        /// The recipient.
        to: Pubkey,
        /// How many.
        lamports: u64,
    },
    /// System `CreateAccount`, `CreateAccountWithSeed` or `CreateAccountAllowPrefund`.
    CreateAccount {
        /// The funding account (`new` itself when a prefunded one is given nothing).
        from: Pubkey,
        /// The account created.
        new: Pubkey,
        /// What `from` gives it.
        lamports: u64,
        /// Its size in bytes.
        space: u64,
        /// The program that owns it from now on.
        owner: Pubkey,
    },
    /// System `Assign`: `account` is owned by the program `owner` from now on.
    Assign {
        /// The account assigned.
        account: Pubkey,
        /// Its new program.
        owner: Pubkey,
    },
    /// Token `InitializeAccount` (2, 3): `account` holds `mint` for `owner` from now on.
    InitializeAccount {
        /// The token account.
        account: Pubkey,
        /// Its mint.
        mint: Pubkey,
        /// Its owner.
        owner: Pubkey,
    },
    /// Token `Transfer`, `TransferChecked`, `TransferCheckedWithFee`.
    TokenTransfer {
        /// The token account debited.
        source: Pubkey,
        /// The token account credited.
        destination: Pubkey,
        /// The source's owner or delegate (or their multisig).
        authority: Pubkey,
        /// Base units the source loses (a transfer fee comes out of them).
        amount: u64,
        /// The mint, named by the checked forms only.
        mint: Option<Pubkey>,
    },
    /// Token `Burn`, `BurnChecked`.
    Burn {
        /// The token account debited.
        account: Pubkey,
        /// Its mint.
        mint: Pubkey,
        /// Base units burnt.
        amount: u64,
    },
    /// Token `Approve`, `ApproveChecked`: `delegate` may move `amount` of `source`.
    Approve {
        /// The token account.
        source: Pubkey,
        /// Who may move its tokens.
        delegate: Pubkey,
        /// How many.
        amount: u64,
    },
    /// Token `SetAuthority` on a token account or a mint.
    SetAuthority {
        /// The token account or mint.
        account: Pubkey,
        /// SPL `AuthorityType` (2 `AccountOwner`, 3 `CloseAccount`).
        authority_type: u8,
        /// The new authority; `None` removes it.
        new: Option<Pubkey>,
    },
    /// Token `CloseAccount`: `account`'s lamports go to `destination`.
    Close {
        /// The token account closed.
        account: Pubkey,
        /// Who gets its lamports.
        destination: Pubkey,
    },
    /// Moves or holds nothing itself: `SyncNative`, `Revoke`, `MintTo`, mint and account
    /// setup, ATA `Create` (its moves are its CPIs), Memo, ComputeBudget, and any program
    /// but System and the token programs.
    Harmless,
    /// An instruction of System or a token program that is not read.
    Unreadable {
        /// The program's name.
        program: &'static str,
        /// Which instruction: its tag or parsed type.
        what: String,
        /// Every account it names.
        accounts: Vec<Pubkey>,
    },
}

/// Why effects cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// The effects on `wallet` of the executed `ops`, given the pre-state of every token
/// account they name (`accounts`).
///
/// The wallet's accounts are the wallet, the token accounts `accounts` gives it, and those
/// the transaction initializes for it. Any other token account is taken for somebody
/// else's, so the caller must read the pre-state of every one the ops name.
pub fn effects_of(
    wallet: &Pubkey,
    accounts: &HashMap<Pubkey, TokenAccount>,
    ops: &[Op],
) -> Result<Effects, Unreadable> {
    let created = ops
        .iter()
        .filter_map(|op| match *op {
            Op::InitializeAccount {
                account,
                mint,
                owner,
            } => Some((account, TokenAccount { mint, owner })),
            _ => None,
        })
        .collect();
    let view = View {
        wallet: *wallet,
        accounts,
        created,
    };
    for op in ops {
        if let Op::Unreadable {
            program,
            what,
            accounts,
        } = op
            && let Some(account) = accounts.iter().find(|a| view.mine(a))
        {
            return Err(Unreadable(format!(
                "{what} of the {program} program names the wallet's account {account}, and \
                 what it does to it cannot be read"
            )));
        }
    }
    let mut effects = Effects::default();
    for op in ops {
        view.read(op, &mut effects)?;
    }
    Ok(effects)
}

/// What is known of the accounts: the pre-state, and the token accounts the transaction
/// initializes.
struct View<'a> {
    wallet: Pubkey,
    accounts: &'a HashMap<Pubkey, TokenAccount>,
    created: HashMap<Pubkey, TokenAccount>,
}

/// Holds `effects` against the wallet's balances before and after the same simulation
/// (`falls`: what each of its accounts lost, the fee left out, by asset): an asset whose
/// balances fell by more than the instructions move out is an outflow of the difference,
/// to `called` (the program the transaction calls: nothing says to whom).
pub fn reconcile(effects: &mut Effects, called: Pubkey, falls: &[(Asset, u64)]) {
    let mut total: HashMap<Asset, U256> = HashMap::new();
    for &(asset, fell) in falls {
        let sum = total.entry(asset).or_default();
        *sum = sum.saturating_add(U256::from(fell));
    }
    let mut hidden: Vec<Flow> = total
        .into_iter()
        .filter_map(|(asset, fell)| {
            let seen = effects.outflow_of(asset);
            (fell > seen).then(|| Flow {
                asset,
                counterparty: sol(called),
                amount: fell - seen,
                token_id: None,
            })
        })
        .collect();
    hidden.sort_by_key(|f| f.asset.name());
    effects.outflows.extend(hidden);
}

fn sol(key: Pubkey) -> WalletAddress {
    WalletAddress::Solana(key)
}

/// The asset a mint stands for: wrapped SOL counts as SOL itself.
pub fn asset(mint: Pubkey) -> Asset {
    if mint == WRAPPED_SOL {
        Asset::Native
    } else {
        Asset::Token(sol(mint))
    }
}

impl View<'_> {
    fn token(&self, key: &Pubkey) -> Option<&TokenAccount> {
        self.accounts.get(key).or_else(|| self.created.get(key))
    }

    fn mine(&self, key: &Pubkey) -> bool {
        *key == self.wallet || self.token(key).is_some_and(|t| t.owner == self.wallet)
    }

    /// Who an account's assets are for: a token account's owner, else the account itself.
    fn party(&self, key: Pubkey) -> WalletAddress {
        sol(self.token(&key).map_or(key, |t| t.owner))
    }

    fn mint(&self, account: Pubkey, named: Option<Pubkey>) -> Result<Pubkey, Unreadable> {
        let known = self.token(&account).map(|t| t.mint);
        named.or(known).ok_or_else(|| {
            Unreadable(format!(
                "the mint of the wallet's token account {account} is not known"
            ))
        })
    }

    /// A move of `amount` of `asset` from `from` to `to`, on the wallet's side (moves within
    /// the wallet and between others are none of its).
    fn flow(&self, asset: Asset, (from, to): (Pubkey, Pubkey), amount: u64, fx: &mut Effects) {
        let (out, into) = (self.mine(&from), self.mine(&to));
        if amount == 0 || out == into {
            return;
        }
        let (flows, counterparty) = if out {
            (&mut fx.outflows, to)
        } else {
            (&mut fx.inflows, from)
        };
        flows.push(Flow {
            asset,
            counterparty: self.party(counterparty),
            amount: U256::from(amount),
            token_id: None,
        });
    }

    fn grant(kind: GrantKind, asset: Asset, spender: WalletAddress, fx: &mut Effects) {
        fx.grants.push(Grant {
            kind,
            asset,
            spender,
            amount: None,
        });
    }

    fn read(&self, op: &Op, fx: &mut Effects) -> Result<(), Unreadable> {
        match *op {
            Op::SystemTransfer { from, to, lamports } => {
                self.flow(Asset::Native, (from, to), lamports, fx);
            }
            Op::CreateAccount {
                from,
                new,
                lamports,
                space: _,
                owner,
            } => {
                if new == self.wallet && owner != SYSTEM {
                    // A prefunded creation of the wallet hands it over like `Assign`.
                    Self::grant(GrantKind::Authority, Asset::Native, sol(owner), fx);
                }
                // Every lamport given leaves with the account: its rent goes to whoever
                // closes it (a token account's owner, a payee's associated one included),
                // so a key with no SOL to move cannot fund accounts for others.
                self.flow(Asset::Native, (from, new), lamports, fx);
            }
            Op::Assign { account, owner } if account == self.wallet && owner != SYSTEM => {
                Self::grant(GrantKind::Authority, Asset::Native, sol(owner), fx);
            }
            Op::TokenTransfer {
                source,
                destination,
                amount,
                mint,
                ..
            } => {
                let (out, into) = (self.mine(&source), self.mine(&destination));
                if out != into {
                    let mint = self.mint(if out { source } else { destination }, mint)?;
                    self.flow(asset(mint), (source, destination), amount, fx);
                }
            }
            Op::Burn {
                account,
                mint,
                amount,
            } if amount > 0 && self.mine(&account) => {
                fx.outflows.push(Flow {
                    asset: asset(mint),
                    counterparty: sol(mint),
                    amount: U256::from(amount),
                    token_id: None,
                });
            }
            Op::Approve {
                source,
                delegate,
                amount,
            } if amount > 0 && self.mine(&source) => {
                fx.grants.push(Grant {
                    kind: GrantKind::Delegation,
                    asset: asset(self.mint(source, None)?),
                    spender: sol(delegate),
                    amount: (amount < u64::MAX).then(|| U256::from(amount)),
                });
            }
            Op::SetAuthority {
                account,
                authority_type: ACCOUNT_OWNER | CLOSE_ACCOUNT,
                new: Some(new),
            } if new != self.wallet && self.mine(&account) => {
                let mint = self.mint(account, None)?;
                Self::grant(GrantKind::Authority, asset(mint), sol(new), fx);
            }
            Op::Close {
                account,
                destination,
            } if self.mine(&account) && !self.mine(&destination) => {
                let mint = self.mint(account, None)?;
                let spender = self.party(destination);
                Self::grant(GrantKind::Authority, asset(mint), spender, fx);
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
