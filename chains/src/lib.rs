//! What speaks to chains and to the services beside them, and reads what they do: the
//! registry of chain slugs and the clients of each family's nodes (a slug is resolved once,
//! into a `Chain`; nothing below compares slug strings again), the effects read from what a
//! chain says of a write (`effects`), the swap aggregators' clients (`trade`) and the wallet
//! provider's (`provider`) over one HTTP policy (`upstream`).
//!
//! **Invariant:** this crate holds no rule of the service and never imports the store or the
//! core: it answers what a node or a service said, in a `ChainError` or its own error types,
//! and the core decides what that means for a caller.

mod builtin;
mod deposit_settings;
pub mod effects;
mod error;
pub mod evm;
mod failover;
pub mod metrics;
pub mod provider;
mod registry;
pub mod rpc_batch;
pub mod solana;
mod solana_fees;
#[cfg(test)]
mod testing;
pub mod trade;
pub mod upstream;

pub use deposit_settings::DepositSettings;
pub use error::ChainError;
pub use registry::{Chain, ChainConfig, Registry};
pub use solana_fees::{
    MAX_UNITS, SolanaFees, budget_in, budget_of, reprice, with_budget, writable,
};
use walletops_domain::{TransactionRecord, TxKind};

/// `text` with every URL in it replaced by `[rpc url]`, for messages that go back to
/// callers.
pub fn without_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // ASCII lower-casing keeps every byte offset.
    while let Some(at) = ["http://", "https://", "ws://", "wss://"]
        .iter()
        .filter_map(|scheme| rest.to_ascii_lowercase().find(scheme))
        .min()
    {
        out.push_str(&rest[..at]);
        out.push_str("[rpc url]");
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>'))
            .map_or(rest.len(), |n| at + n);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The EVM swap keyword's resolved address and Solana's wrapped SOL mint: a swap from
/// either sells the native coin.
const NATIVE_SWAP_TOKENS: [&str; 2] = [
    "0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee",
    "So11111111111111111111111111111111111111112",
];

/// The decimals and symbol of what record `t`'s amount counts (a swap's, what it sells),
/// when known: the native coin's from the registry. A token's are not kept with the
/// record, so it has none and is shown in base units.
pub fn amount_units(t: &TransactionRecord, chains: &Registry) -> Option<(u32, String)> {
    let native = match (&t.kind, &t.swap) {
        (TxKind::Swap, Some(swap)) => NATIVE_SWAP_TOKENS
            .iter()
            .any(|n| n.eq_ignore_ascii_case(&swap.from_token)),
        _ => t.amount.is_some() && t.token.is_none(),
    };
    let chain = chains.resolve(&t.chain).ok().filter(|_| native)?;
    Some((chain.native_decimals(), chain.native_symbol().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_no_url() {
        assert_eq!(
            without_urls(
                "error sending request for url (https://base.g.alchemy.com/v2/SECRET): refused"
            ),
            "error sending request for url ([rpc url]): refused"
        );
        assert_eq!(
            without_urls("http://a/k1 and wss://b/k2"),
            "[rpc url] and [rpc url]"
        );
        assert_eq!(without_urls("no url here"), "no url here");
        assert_eq!(without_urls("at HTTPS://Node/KEY."), "at [rpc url]");
    }
}
