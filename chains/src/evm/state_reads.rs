//! The wallet's state read inside a write's simulation: its coin and the tokens a limited
//! key is held to, before and after the write, and the allowances of every spender the
//! write named in an `Approval`. The reads are calls of the simulated block, made by a
//! reader account of the simulation's own (its balance given by a state override), so they
//! see exactly the state the write leaves; what a contract's events say is then held
//! against what the wallet's state says (`effects::evm::reconcile`).

use alloy::{
    primitives::{Address, Bytes, U256, address},
    rpc::types::{
        TransactionRequest,
        simulate::SimCallResult,
        state::{StateOverride, StateOverridesBuilder},
    },
};

use super::{Fees, decode_balance, erc20_allowance, erc20_balance_of};
use crate::effects::evm::{Change, StateReads};

/// The account the reads are made from: no key holds it; its balance is an override.
const READER: Address = address!("0000000000000000000000000000000057a7e5ee");

/// An address given, for the simulation only, code that answers the coin balance of the
/// address in its calldata: `BALANCE(calldataload(0))`.
const COIN_READER: Address = address!("0000000000000000000000000000000057a7e5e1");

/// `PUSH1 0 CALLDATALOAD BALANCE PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN`.
const COIN_READER_CODE: [u8; 12] = [
    0x60, 0x00, 0x35, 0x31, 0x60, 0x00, 0x52, 0x60, 0x20, 0x60, 0x00, 0xf3,
];

/// Gas each read may use: a token's `balanceOf` or `allowance` needs a few thousand.
const READ_GAS: u64 = 100_000;

/// What to read around a write of `wallet`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watch {
    /// The tokens whose balance is read (the coin always is).
    pub tokens: Vec<Address>,
    /// The (token, spender) pairs whose allowance is read.
    pub allowances: Vec<(Address, Address)>,
}

/// One read: the call's target and data.
#[derive(Debug, Clone)]
enum Read {
    Coin,
    Token(Address),
    Allowance(Address, Address),
}

impl Watch {
    fn reads(&self) -> Vec<Read> {
        std::iter::once(Read::Coin)
            .chain(self.tokens.iter().map(|t| Read::Token(*t)))
            .chain(self.allowances.iter().map(|(t, s)| Read::Allowance(*t, *s)))
            .collect()
    }

    /// The read calls of `wallet` at fees `fees`, numbered from `first_nonce` of the reader.
    fn calls(&self, wallet: Address, fees: Fees, first_nonce: u64) -> Vec<TransactionRequest> {
        self.reads()
            .into_iter()
            .enumerate()
            .map(|(i, read)| {
                let (to, input): (Address, Bytes) = match read {
                    Read::Coin => (COIN_READER, wallet.into_word().to_vec().into()),
                    Read::Token(token) => (token, erc20_balance_of(wallet)),
                    Read::Allowance(token, spender) => (token, erc20_allowance(wallet, spender)),
                };
                TransactionRequest::default()
                    .from(READER)
                    .to(to)
                    .input(input.into())
                    .gas_limit(READ_GAS)
                    .max_fee_per_gas(fees.max_fee_per_gas)
                    .max_priority_fee_per_gas(fees.max_priority_fee_per_gas)
                    .nonce(first_nonce + i as u64)
            })
            .collect()
    }

    /// How many calls `around` adds before the write (as many come after it).
    pub(super) fn count(&self) -> usize {
        1 + self.tokens.len() + self.allowances.len()
    }

    /// The calls of the simulated block around `write` of `wallet`: the reads, the write,
    /// the reads again.
    pub(super) fn around(
        &self,
        wallet: Address,
        fees: Fees,
        write: TransactionRequest,
    ) -> Vec<TransactionRequest> {
        let n = self.count() as u64;
        let mut calls = self.calls(wallet, fees, 0);
        calls.push(write);
        calls.extend(self.calls(wallet, fees, n));
        calls
    }

    /// The overrides the reads need: the reader's balance and nonce, the coin reader's code.
    pub(super) fn overrides() -> StateOverride {
        StateOverridesBuilder::with_capacity(2)
            .with_balance(READER, U256::from(1) << 128)
            .with_nonce(READER, 0)
            .with_code(COIN_READER, Bytes::from_static(&COIN_READER_CODE))
            .build()
    }

    /// What the block's `calls` (as `around` made them) read, the write's own result
    /// being `calls[count]`, paying `gas_price` per gas.
    pub(super) fn read(&self, calls: &[SimCallResult], gas_price: U256) -> StateReads {
        let n = self.count();
        let value = |i: usize| {
            calls
                .get(i)
                .filter(|c| c.status)
                .and_then(|c| decode_balance(&c.return_data))
        };
        let change = |k: usize| {
            Some(Change {
                before: value(k)?,
                after: value(n + 1 + k)?,
            })
        };
        let mut reads = StateReads {
            fee: calls.get(n).map_or(U256::ZERO, |c| {
                U256::from(c.gas_used).saturating_mul(gas_price)
            }),
            ..StateReads::default()
        };
        for (k, read) in self.reads().into_iter().enumerate() {
            let Some(change) = change(k) else { continue };
            match read {
                Read::Coin => reads.native = Some(change),
                Read::Token(token) => reads.tokens.push((token, change)),
                Read::Allowance(token, spender) => reads.allowances.push((token, spender, change)),
            }
        }
        reads
    }
}

/// The price per gas a write at `fees` pays in a block of base fee `base_fee`.
pub(super) fn effective_price(fees: Fees, base_fee: Option<U256>) -> U256 {
    let max = U256::from(fees.max_fee_per_gas);
    match base_fee {
        Some(base) => max.min(base.saturating_add(U256::from(fees.max_priority_fee_per_gas))),
        None => max,
    }
}
