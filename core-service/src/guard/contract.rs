//! The guard contract (`core-service/contracts/WalletGuard.sol`, compiled into
//! `contracts/build/`): where it lives on every chain (CREATE2 through the deterministic
//! deployment proxy), what a delegation to it looks like, and how a write is wrapped in its
//! `execute` with the checks its key's reservation sets.

use std::sync::LazyLock;

use alloy::{
    primitives::{Address, B256, Bytes, U256, address, b256},
    sol,
    sol_types::{SolCall, SolValue},
};
use walletops_domain::{Asset, Effects, WalletAddress};

sol!(
    #[derive(Debug, PartialEq, Eq)]
    WalletGuard,
    "contracts/build/WalletGuard.json"
);

sol! {
    /// One call the wallet makes (`WalletGuard.Call`, which its ABI does not list: `execute`
    /// takes it encoded).
    #[derive(Debug, PartialEq, Eq)]
    struct Call {
        address target;
        uint256 value;
        bytes data;
    }

    /// One condition the calls must leave true (`WalletGuard.Check`).
    #[derive(Debug, PartialEq, Eq)]
    struct Check {
        address token;
        address spender;
        uint256 max;
    }
}

/// The deterministic deployment proxy (Arachnid's CREATE2 factory), at this address on
/// nearly every EVM chain and on anvil: the guard deployed through it has one address
/// everywhere, so that address can be checked rather than trusted.
pub(super) const DEPLOYER: Address = address!("4e59b44847b379578588920cA78FbF26c0B4956C");

/// The salt the guard is deployed with.
const SALT: B256 = b256!("0000000000000000000000000000000000000000000000000000000057616c6c");

/// ERC-7821's mode for one batch whose op data (here: the checks) follows the calls.
const BATCH_OP_DATA: B256 =
    b256!("0100000000007821000100000000000000000000000000000000000000000000");

/// The guard's creation code, as compiled.
fn init_code() -> &'static Bytes {
    static CODE: LazyLock<Bytes> = LazyLock::new(|| WalletGuard::BYTECODE.clone());
    &CODE
}

/// The guard's address on every chain with the deployment proxy.
pub fn guard_address() -> Address {
    static AT: LazyLock<Address> = LazyLock::new(|| DEPLOYER.create2_from_code(SALT, init_code()));
    *AT
}

/// The proxy's input that deploys the guard: the salt, then the creation code.
pub(super) fn deployment_input() -> Bytes {
    [SALT.as_slice(), init_code()].concat().into()
}

/// The code an account delegated to `target` by EIP-7702 holds: `0xef0100 ‖ target`.
pub fn delegation_code(target: Address) -> Bytes {
    [&[0xef, 0x01, 0x00][..], target.as_slice()].concat().into()
}

/// The checks a guarded write runs after its call: for the coin and each token in `watch`,
/// its balance may fall by at most what the key reserves of it (its outflow and its grants in
/// `effects`); the allowance on each watched token of `target` and of every spender `effects`
/// grants may rise only to what is granted to it.
pub fn checks(effects: &Effects, watch: &[Address], target: Address) -> Vec<Check> {
    let reserved = |asset: Asset| {
        effects
            .grants
            .iter()
            .filter(|g| g.asset == asset)
            .fold(effects.outflow_of(asset), |sum, g| {
                sum.saturating_add(g.amount.unwrap_or(U256::MAX))
            })
    };
    let mut checks = vec![Check {
        token: Address::ZERO,
        spender: Address::ZERO,
        max: reserved(Asset::Native),
    }];
    for &token in watch {
        let asset = Asset::Token(WalletAddress::Evm(token));
        checks.push(Check {
            token,
            spender: Address::ZERO,
            max: reserved(asset),
        });
        let mut spenders: Vec<Address> = effects
            .grants
            .iter()
            .filter(|g| g.asset == asset)
            .filter_map(|g| match g.spender {
                WalletAddress::Evm(a) => Some(a),
                WalletAddress::Solana(_) => None,
            })
            .collect();
        if target != token {
            spenders.push(target);
        }
        spenders.sort_unstable();
        spenders.dedup();
        for spender in spenders {
            let granted = effects
                .grants
                .iter()
                .filter(|g| g.asset == asset && g.spender == WalletAddress::Evm(spender))
                .fold(U256::ZERO, |sum, g| {
                    sum.saturating_add(g.amount.unwrap_or(U256::MAX))
                });
            checks.push(Check {
                token,
                spender,
                max: granted,
            });
        }
    }
    checks
}

/// The wallet's call to itself that makes `(to, value, input)` under `checks`.
pub fn execute(to: Address, value: U256, input: &Bytes, checks: Vec<Check>) -> Bytes {
    let calls = vec![Call {
        target: to,
        value,
        data: input.clone(),
    }];
    let op_data: Bytes = checks.abi_encode().into();
    WalletGuard::executeCall {
        mode: BATCH_OP_DATA,
        executionData: (calls, op_data).abi_encode_params().into(),
    }
    .abi_encode()
    .into()
}

#[cfg(test)]
mod tests;
