//! What the monitor reports of a record that ended: how often its same bytes were sent
//! again; landed, how long it took from its request (by chain and send route) and the
//! priority fee it offered.

use super::Monitor;
use crate::recovery::{evm::decode_payload, solana::decode};
use walletops_chains::budget_in;
use walletops_domain::{ChainFamily, OpenTransaction, TxStatus};

impl Monitor {
    /// Reports `open`, just ended `status` (after the commit).
    pub(super) fn report_end(&self, open: &OpenTransaction, status: TxStatus) {
        crate::metrics::resent(&open.chain, self.resent.take(open.id));
        let Ok(chain) = self.chains.resolve(&open.chain) else {
            return;
        };
        if status != TxStatus::Confirmed {
            return;
        }
        let took = (crate::clock::now() - open.created_at)
            .to_std()
            .unwrap_or_default();
        let (route, priority) = match chain.family() {
            ChainFamily::Evm => (
                "rpc",
                decode_payload(&open.signed_payload)
                    .ok()
                    .map(|tx| ("wei_per_gas", tx.max_priority_fee_per_gas as f64)),
            ),
            ChainFamily::Solana => (
                if chain.send_urls().is_empty() {
                    "rpc"
                } else {
                    "rpc_and_send_urls"
                },
                decode(&open.signed_payload).ok().and_then(|tx| {
                    let message = &tx.message;
                    let (_, price) =
                        budget_in(message.static_account_keys(), message.instructions());
                    price.map(|p| ("micro_lamports_per_cu", p as f64))
                }),
            ),
        };
        crate::metrics::landed(&open.chain, route, took, priority);
    }
}
