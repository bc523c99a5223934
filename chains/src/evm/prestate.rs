//! What a call changes in the chain's state beyond balances, from `debug_traceCall` with
//! the `prestateTracer` in diff mode: whose storage, code and nonce it writes. Balances are
//! the effects' business (`effects::evm`); this tells whether anything else moved that the
//! effects cannot speak for (`effects::evm::unexplained`).

use alloy::{
    primitives::Address,
    providers::Provider as _,
    rpc::types::{
        BlockNumberOrTag,
        trace::geth::{
            DiffMode, GethDebugTracingCallOptions, GethDebugTracingOptions, PreStateConfig,
        },
    },
    transports::RpcError,
};

use super::{EvmClient, Signing, rpc_failed, simulate::timeout};
use crate::ChainError;
use crate::effects::evm::StateChange;

/// The changes beyond balances that `diff` shows, per account, in address order.
fn changes_of(diff: &DiffMode) -> Vec<StateChange> {
    let mut addresses: Vec<Address> = diff.pre.keys().chain(diff.post.keys()).copied().collect();
    addresses.sort_unstable();
    addresses.dedup();
    addresses
        .into_iter()
        .filter_map(|address| {
            let (pre, post) = (diff.pre.get(&address), diff.post.get(&address));
            let post_storage = post.map(|p| &p.storage);
            let storage = post_storage.is_some_and(|s| !s.is_empty())
                || pre.is_some_and(|p| {
                    p.storage
                        .keys()
                        .any(|slot| post_storage.is_none_or(|s| !s.contains_key(slot)))
                });
            let code = post
                .is_some_and(|p| p.code.is_some() && p.code != pre.and_then(|p| p.code.clone()));
            let nonce =
                post.is_some_and(|p| p.nonce.is_some() && p.nonce != pre.and_then(|p| p.nonce));
            (storage || code || nonce).then_some(StateChange {
                address,
                storage,
                code,
                nonce,
            })
        })
        .collect()
}

impl EvmClient {
    /// What `write` changes beyond balances, traced on the latest block; `None` when the
    /// node has no `debug_traceCall` or no prestate tracer.
    pub async fn state_changes(
        &self,
        write: Signing<'_>,
    ) -> Result<Option<Vec<StateChange>>, ChainError> {
        let tracer = GethDebugTracingOptions::prestate_tracer(PreStateConfig {
            diff_mode: Some(true),
            disable_code: None,
            disable_storage: None,
        });
        let traced: Result<DiffMode, _> = timeout(self.provider.raw_request(
            "debug_traceCall".into(),
            (
                write.request(),
                BlockNumberOrTag::Latest,
                GethDebugTracingCallOptions::new(tracer),
            ),
        ))
        .await;
        match traced {
            Ok(diff) => Ok(Some(changes_of(&diff))),
            Err(RpcError::ErrorResp(e)) if super::simulate::no_such_method(e.code, &e.message) => {
                Ok(None)
            }
            Err(e) => Err(rpc_failed("trace the state the transaction changes", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use alloy::{
        primitives::{B256, Bytes, U256},
        rpc::types::trace::geth::AccountState,
    };

    use super::*;

    fn state(nonce: Option<u64>, slot: Option<u8>, code: Option<&[u8]>) -> AccountState {
        AccountState {
            balance: Some(U256::from(1)),
            code: code.map(Bytes::copy_from_slice),
            nonce,
            storage: slot
                .map(|s| BTreeMap::from([(B256::repeat_byte(s), B256::repeat_byte(1))]))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn storage_code_and_nonce_changes_are_told_apart_from_balances() {
        let (wallet, token, payee, made) = (
            Address::repeat_byte(1),
            Address::repeat_byte(2),
            Address::repeat_byte(3),
            Address::repeat_byte(4),
        );
        let diff = DiffMode {
            pre: BTreeMap::from([
                (wallet, state(Some(1), None, None)),
                (token, state(None, Some(9), Some(b"t"))),
                (payee, state(None, None, None)),
            ]),
            post: BTreeMap::from([
                (wallet, state(Some(2), None, None)),
                (token, state(None, Some(9), None)),
                (payee, state(None, None, None)),
                (made, state(Some(1), None, Some(b"new"))),
            ]),
        };
        let changes = changes_of(&diff);
        assert_eq!(
            changes,
            vec![
                StateChange {
                    address: wallet,
                    storage: false,
                    code: false,
                    nonce: true
                },
                StateChange {
                    address: token,
                    storage: true,
                    code: false,
                    nonce: false
                },
                StateChange {
                    address: made,
                    storage: false,
                    code: true,
                    nonce: true
                },
            ]
        );
        // A slot set back to zero leaves the post state: still a write.
        let cleared = DiffMode {
            pre: BTreeMap::from([(token, state(None, Some(9), None))]),
            post: BTreeMap::new(),
        };
        assert!(changes_of(&cleared)[0].storage);
    }
}
