//! Whether a contract call's state changes are understood: every account it writes beyond
//! balances is the wallet's nonce, or the storage of a contract whose every event was read
//! into effects (a token's `Transfer`s and `Approval`s). Anything else (a contract keeping a
//! claim on the wallet in its own storage, code deployed or delegated, contracts created)
//! is what no effect speaks for.

use alloy::{primitives::Address, sol_types::SolEvent as _};

use super::{Erc20, Erc721, Erc1155, Holds, Log, NATIVE_TRANSFERS, PERMIT2, Permit2};

/// One account a call changes beyond its balance (`debug_traceCall`'s prestate diff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChange {
    /// The account.
    pub address: Address,
    /// Whether it writes the account's storage.
    pub storage: bool,
    /// Whether it writes the account's code (a contract made, or a delegation set).
    pub code: bool,
    /// Whether it moves the account's nonce (its transaction, or a contract it creates).
    pub nonce: bool,
}

/// Whether `log` is an event the effects are read from.
fn read_into_effects(log: &Log) -> bool {
    let Some(signature) = log.topics.first() else {
        return false;
    };
    let permit2 = [
        Permit2::Approval::SIGNATURE_HASH,
        Permit2::Permit::SIGNATURE_HASH,
    ];
    [
        Erc20::Transfer::SIGNATURE_HASH,
        Erc20::Approval::SIGNATURE_HASH,
        Erc721::ApprovalForAll::SIGNATURE_HASH,
        Holds::AuthorizedOperator::SIGNATURE_HASH,
        Holds::BorrowAllowanceDelegated::SIGNATURE_HASH,
        Erc1155::TransferSingle::SIGNATURE_HASH,
        Erc1155::TransferBatch::SIGNATURE_HASH,
    ]
    .contains(signature)
        || (log.address == PERMIT2 && permit2.contains(signature))
}

/// Why the state `changes` of a call by `wallet` that emitted `logs` are not all
/// understood; `None` when they are.
pub fn unexplained(wallet: Address, changes: &[StateChange], logs: &[Log]) -> Option<String> {
    let emitted = |address: Address| {
        let mut theirs = logs
            .iter()
            .filter(|l| l.address == address && l.address != NATIVE_TRANSFERS)
            .peekable();
        theirs.peek().is_some() && theirs.all(read_into_effects)
    };
    changes.iter().find_map(|c| {
        if c.address == wallet {
            return (c.storage || c.code)
                .then(|| format!("it writes the code or storage of the wallet {wallet}"));
        }
        if c.code || c.nonce {
            return Some(format!("it deploys or changes code at {}", c.address));
        }
        (c.storage && !emitted(c.address)).then(|| {
            format!(
                "it writes the storage of {}, which emits no event the effects are read from",
                c.address
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{B256, Bytes, U256};

    use super::*;

    fn change(address: Address, storage: bool, code: bool, nonce: bool) -> StateChange {
        StateChange {
            address,
            storage,
            code,
            nonce,
        }
    }

    fn transfer(token: Address) -> Log {
        Log {
            address: token,
            topics: vec![
                Erc20::Transfer::SIGNATURE_HASH,
                Address::repeat_byte(1).into_word(),
                Address::repeat_byte(2).into_word(),
            ],
            data: Bytes::from(U256::from(5).to_be_bytes::<32>().to_vec()),
        }
    }

    #[test]
    fn only_the_wallets_nonce_and_token_storage_whose_events_were_read_are_understood() {
        let (wallet, token, vault) = (
            Address::repeat_byte(1),
            Address::repeat_byte(7),
            Address::repeat_byte(9),
        );
        let paid = [
            change(wallet, false, false, true),
            change(token, true, false, false),
        ];
        assert_eq!(unexplained(wallet, &paid, &[transfer(token)]), None);
        // The same storage write with no event read: a claim the effects cannot see.
        assert!(unexplained(wallet, &paid, &[]).is_some_and(|w| w.contains("storage of")));
        let other_event = Log {
            topics: vec![B256::repeat_byte(0x42)],
            ..transfer(token)
        };
        assert!(unexplained(wallet, &paid, &[transfer(token), other_event]).is_some());
        let kept = [
            change(wallet, false, false, true),
            change(vault, true, false, false),
        ];
        let why = unexplained(wallet, &kept, &[transfer(token)]).expect("refused");
        assert!(why.contains(&vault.to_string()), "{why}");
        let deployed = [change(vault, false, true, true)];
        assert!(unexplained(wallet, &deployed, &[]).is_some_and(|w| w.contains("code")));
        let delegated = [change(wallet, false, true, true)];
        assert!(unexplained(wallet, &delegated, &[]).is_some());
    }
}
