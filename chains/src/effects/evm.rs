//! An EVM write's effects on its wallet, read from the logs of its simulation
//! (`eth_simulateV1` with `traceTransfers`, whose native moves come as ERC-20 `Transfer` logs
//! of `0xEeee…EEeE`, internal calls included) or of its receipt: ERC-20 and ERC-721
//! transfers (indexed or not) and approvals, `ApprovalForAll`, ERC-1155 transfers, Permit2
//! approvals, ERC-777 operators and Aave credit delegations. Nothing a log says is dropped
//! by a guess: where the simulation also read the wallet's state (`reconcile`), the state
//! decides what an `Approval` granted, and a fall of a balance no event shows is an outflow.

use alloy::{
    primitives::{Address, B256, Bytes, U256, address},
    sol,
    sol_types::SolEvent,
};
use walletops_domain::{Asset, Effects, Flow, Grant, GrantKind, WalletAddress};

/// The address `traceTransfers` gives the logs of native value moves (ERC-7528).
pub const NATIVE_TRANSFERS: Address = address!("eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee");

/// Permit2, at the same address on every chain it is deployed to.
pub const PERMIT2: Address = address!("000000000022D473030F116dDEE9F6B43aC78BA3");

sol! {
    /// ERC-20 events (and `traceTransfers`' native moves): the value in the data.
    interface Erc20 {
        event Transfer(address indexed from, address indexed to, uint256 value);
        event Approval(address indexed owner, address indexed spender, uint256 value);
    }
}

sol! {
    /// A `Transfer` with no indexed field: the same signature, everything in the data.
    interface Erc20Unindexed {
        event Transfer(address from, address to, uint256 value);
    }
}

sol! {
    /// ERC-777's operators (and the lending pools' credit delegations, Aave's debt tokens):
    /// holds on the wallet's assets granted without an `Approval`.
    interface Holds {
        event AuthorizedOperator(address indexed operator, address indexed tokenHolder);
        event BorrowAllowanceDelegated(address indexed fromUser, address indexed toUser, address asset, uint256 amount);
    }
}

sol! {
    /// ERC-721 events: the token id indexed too, so one topic more than ERC-20's.
    interface Erc721 {
        event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);
        event Approval(address indexed owner, address indexed approved, uint256 indexed tokenId);
        event ApprovalForAll(address indexed owner, address indexed operator, bool approved);
    }
}

sol! {
    /// ERC-1155 transfers.
    interface Erc1155 {
        event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value);
        event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values);
    }
}

sol! {
    /// Permit2's allowances, which are its own and not the token's.
    interface Permit2 {
        event Approval(address indexed owner, address indexed token, address indexed spender, uint160 amount, uint48 expiration);
        event Permit(address indexed owner, address indexed token, address indexed spender, uint160 amount, uint48 expiration, uint48 nonce);
    }
}

/// A value of the wallet's state before and after the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// Before the write, in the same simulated block.
    pub before: U256,
    /// After it.
    pub after: U256,
}

impl Change {
    /// How much it fell, or zero.
    pub fn fall(&self) -> U256 {
        self.before.saturating_sub(self.after)
    }
}

/// What the reads found. A read a token did not answer as an ERC-20 is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateReads {
    /// The wallet's coin.
    pub native: Option<Change>,
    /// The fee the write paid in the simulation (gas used × effective gas price): the
    /// coin's fall less this is what the write moved.
    pub fee: U256,
    /// Each watched token's balance.
    pub tokens: Vec<(Address, Change)>,
    /// Each (token, spender) allowance the write's `Approval`s named.
    pub allowances: Vec<(Address, Address, Change)>,
}

/// One log of a simulated or mined call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    /// The contract that emitted it.
    pub address: Address,
    /// Its topics, the event's signature first.
    pub topics: Vec<B256>,
    /// Its data.
    pub data: Bytes,
}

/// The effects on `wallet` of a call whose logs (in order) are `logs`. A log that is not one
/// of the events above, or does not decode as one, moves nothing of the wallet's.
pub fn effects_of(wallet: Address, logs: &[Log]) -> Effects {
    let mut effects = Effects::default();
    for log in logs {
        read(wallet, log, &mut effects);
    }
    effects
}

/// `effects` of a write calling `called`, held against its wallet's state
/// `reads` taken around it in the same simulation:
///
/// * a balance (the coin's less the fee) that fell by more than the events move out is an
///   outflow of the difference, to the called contract (no event says to whom);
/// * an allowance an `Approval` named is granted when it rose, as what it is after the
///   write; one that did not rise (a `transferFrom` spending it, a lowered one) grants
///   nothing.
pub fn reconcile(effects: &mut Effects, called: Address, reads: &StateReads) {
    let hidden = |effects: &Effects, asset: Asset, fell: U256| {
        let seen = effects.outflow_of(asset);
        (fell > seen).then(|| Flow {
            asset,
            counterparty: evm(called),
            amount: fell - seen,
            token_id: None,
        })
    };
    if let Some(native) = reads.native {
        let fell = native.fall().saturating_sub(reads.fee);
        effects
            .outflows
            .extend(hidden(effects, Asset::Native, fell));
    }
    for (token, change) in &reads.tokens {
        let asset = Asset::Token(evm(*token));
        effects
            .outflows
            .extend(hidden(effects, asset, change.fall()));
    }
    for (token, spender, change) in &reads.allowances {
        let (asset, spender) = (Asset::Token(evm(*token)), evm(*spender));
        effects.grants.retain(|g| {
            !(g.kind == GrantKind::Allowance && g.asset == asset && g.spender == spender)
        });
        if change.after > change.before {
            effects.grants.push(Grant {
                kind: GrantKind::Allowance,
                asset,
                spender,
                amount: bounded(change.after, U256::MAX),
            });
        }
    }
}

/// The effects on `wallet` of its mined transaction that sent `value` to `to` (`None`: it
/// created a contract) and emitted `logs`: nothing when it reverted. A wallet's coins leave
/// it only as the value of its own transaction, so that is its native outflow.
pub fn landed(wallet: Address, (to, value): (Option<Address>, U256), logs: &[Log]) -> Effects {
    let mut all = Vec::with_capacity(logs.len() + 1);
    if let Some(to) = to
        && !value.is_zero()
    {
        all.push(Log {
            address: NATIVE_TRANSFERS,
            topics: vec![
                Erc20::Transfer::SIGNATURE_HASH,
                wallet.into_word(),
                to.into_word(),
            ],
            data: value.to_be_bytes::<32>().to_vec().into(),
        });
    }
    all.extend_from_slice(logs);
    effects_of(wallet, &all)
}

/// What a write the service encodes itself says it moves or grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    /// A send of `amount` of `asset` to `to`.
    Send {
        /// The asset sent.
        asset: Asset,
        /// The payee.
        to: Address,
        /// The amount.
        amount: U256,
    },
    /// An allowance of `amount` of `token` to `spender`.
    Allowance {
        /// The token.
        token: Address,
        /// The spender.
        spender: Address,
        /// The allowance set.
        amount: U256,
    },
}

/// `effects` raised to at least what `declared` says: a token may show its simulation less
/// than it moves or grants once mined, so the declared amount is a floor.
pub fn at_least(effects: &mut Effects, declared: Declared) {
    match declared {
        Declared::Send { asset, to, amount } => {
            let seen = effects.outflow_of(asset);
            if amount > seen {
                effects.outflows.push(Flow {
                    asset,
                    counterparty: evm(to),
                    amount: amount - seen,
                    token_id: None,
                });
            }
        }
        Declared::Allowance {
            token,
            spender,
            amount,
        } => {
            let (asset, spender) = (Asset::Token(evm(token)), evm(spender));
            let granted = effects.grants.iter_mut().find(|g| {
                g.kind == GrantKind::Allowance && g.asset == asset && g.spender == spender
            });
            let amount = bounded(amount, U256::MAX);
            match granted {
                Some(g) => {
                    if let (Some(seen), Some(declared)) = (g.amount, amount) {
                        g.amount = Some(seen.max(declared));
                    } else {
                        g.amount = None;
                    }
                }
                None if amount != Some(U256::ZERO) => effects.grants.push(Grant {
                    kind: GrantKind::Allowance,
                    asset,
                    spender,
                    amount,
                }),
                None => {}
            }
        }
    }
}

fn evm(a: Address) -> WalletAddress {
    WalletAddress::Evm(a)
}

/// The asset a log of `emitter` is about: the native coin for `traceTransfers`' logs.
fn asset_of(emitter: Address) -> Asset {
    if emitter == NATIVE_TRANSFERS {
        Asset::Native
    } else {
        Asset::Token(evm(emitter))
    }
}

/// A flow of `asset` between `from` and `to`, added to `effects` on the wallet's side.
fn flow(
    wallet: Address,
    (from, to): (Address, Address),
    asset: Asset,
    (amount, token_id): (U256, Option<U256>),
    effects: &mut Effects,
) {
    if from == to || amount.is_zero() {
        return;
    }
    if from == wallet {
        effects.outflows.push(Flow {
            asset,
            counterparty: evm(to),
            amount,
            token_id,
        });
    } else if to == wallet {
        effects.inflows.push(Flow {
            asset,
            counterparty: evm(from),
            amount,
            token_id,
        });
    }
}

/// An amount that grants without bound: the type's maximum (what `approve(MAX)` gives), or
/// at least 2^255, far past any supply.
fn bounded(amount: U256, max: U256) -> Option<U256> {
    (amount < max && amount < U256::from(1) << 255).then_some(amount)
}

fn read(wallet: Address, log: &Log, effects: &mut Effects) {
    let Some(&signature) = log.topics.first() else {
        return;
    };
    let (topics, data) = (log.topics.as_slice(), &log.data[..]);
    let asset = asset_of(log.address);
    // ERC-20 and ERC-721 share the signatures of `Transfer` and `Approval`: three topics
    // are ERC-20's (the value in the data), four ERC-721's (the token id indexed).
    let fungible = topics.len() == 3;
    if signature == Erc20::Transfer::SIGNATURE_HASH {
        if fungible && let Ok(e) = Erc20::Transfer::decode_raw_log(topics, data) {
            flow(wallet, (e.from, e.to), asset, (e.value, None), effects);
        } else if topics.len() == 1
            && let Ok(e) = Erc20Unindexed::Transfer::decode_raw_log(topics, data)
        {
            flow(wallet, (e.from, e.to), asset, (e.value, None), effects);
        } else if let Ok(e) = Erc721::Transfer::decode_raw_log(topics, data) {
            let one = (U256::from(1), Some(e.tokenId));
            flow(wallet, (e.from, e.to), asset, one, effects);
        }
    } else if signature == Erc20::Approval::SIGNATURE_HASH {
        if fungible && let Ok(e) = Erc20::Approval::decode_raw_log(topics, data) {
            if e.owner == wallet && !e.value.is_zero() {
                effects.grants.push(Grant {
                    kind: GrantKind::Allowance,
                    asset,
                    spender: evm(e.spender),
                    amount: bounded(e.value, U256::MAX),
                });
            }
        } else if let Ok(e) = Erc721::Approval::decode_raw_log(topics, data)
            && e.owner == wallet
            && !e.approved.is_zero()
        {
            effects.grants.push(Grant {
                kind: GrantKind::Token,
                asset,
                spender: evm(e.approved),
                amount: Some(U256::from(1)),
            });
        }
    } else if signature == Erc721::ApprovalForAll::SIGNATURE_HASH {
        if let Ok(e) = Erc721::ApprovalForAll::decode_raw_log(topics, data)
            && e.owner == wallet
            && e.approved
        {
            effects.grants.push(Grant {
                kind: GrantKind::All,
                asset,
                spender: evm(e.operator),
                amount: None,
            });
        }
    } else if signature == Holds::AuthorizedOperator::SIGNATURE_HASH {
        if let Ok(e) = Holds::AuthorizedOperator::decode_raw_log(topics, data)
            && e.tokenHolder == wallet
        {
            effects.grants.push(Grant {
                kind: GrantKind::All,
                asset,
                spender: evm(e.operator),
                amount: None,
            });
        }
    } else if signature == Holds::BorrowAllowanceDelegated::SIGNATURE_HASH {
        // A credit line on the pool's `asset`: the delegate borrows it against the wallet's
        // collateral, and the debt is the wallet's.
        if let Ok(e) = Holds::BorrowAllowanceDelegated::decode_raw_log(topics, data)
            && e.fromUser == wallet
            && !e.amount.is_zero()
        {
            effects.grants.push(Grant {
                kind: GrantKind::Delegation,
                asset: Asset::Token(evm(e.asset)),
                spender: evm(e.toUser),
                amount: bounded(e.amount, U256::MAX),
            });
        }
    } else if signature == Erc1155::TransferSingle::SIGNATURE_HASH {
        if let Ok(e) = Erc1155::TransferSingle::decode_raw_log(topics, data) {
            flow(
                wallet,
                (e.from, e.to),
                asset,
                (e.value, Some(e.id)),
                effects,
            );
        }
    } else if signature == Erc1155::TransferBatch::SIGNATURE_HASH {
        if let Ok(e) = Erc1155::TransferBatch::decode_raw_log(topics, data) {
            for (id, value) in e.ids.iter().zip(&e.values) {
                flow(wallet, (e.from, e.to), asset, (*value, Some(*id)), effects);
            }
        }
    } else if log.address == PERMIT2 {
        let granted = if signature == Permit2::Approval::SIGNATURE_HASH {
            Permit2::Approval::decode_raw_log(topics, data)
                .ok()
                .map(|e| (e.owner, e.token, e.spender, e.amount))
        } else if signature == Permit2::Permit::SIGNATURE_HASH {
            Permit2::Permit::decode_raw_log(topics, data)
                .ok()
                .map(|e| (e.owner, e.token, e.spender, e.amount))
        } else {
            None
        };
        if let Some((owner, token, spender, amount)) = granted
            && owner == wallet
            && !amount.is_zero()
        {
            let max = (U256::from(1) << 160) - U256::from(1);
            effects.grants.push(Grant {
                kind: GrantKind::Allowance,
                asset: Asset::Token(evm(token)),
                spender: evm(spender),
                amount: bounded(U256::from(amount), max),
            });
        }
    }
}

mod understood;
pub use understood::{StateChange, unexplained};

#[cfg(test)]
mod tests;
