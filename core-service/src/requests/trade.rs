//! The trade requests: quotes, parsed for their chain's family. `NATIVE`, in any letter case,
//! is resolved here to the address aggregators use for the chain's native coin.

use alloy::primitives::Address;
use walletops_proto::v1 as pb;

use super::{chain, non_empty, optional_address};
use crate::{
    chains::{Chain, Registry},
    domain::{AmountKind, ChainFamily, WalletAddress, parse_amount},
    error::{Result, Violations, WalletOpsError},
    trade::{EvmQuoteRequest, NATIVE_TOKEN, Slippage, SolanaQuoteRequest, WRAPPED_SOL_MINT},
};

/// The chain id of Solana mainnet, the only cluster aggregators trade on.
const SOLANA_MAINNET: i64 = 0;

/// What is priced, typed for the chain's family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TradePair {
    /// On an EVM chain (1inch).
    Evm(EvmQuoteRequest),
    /// On Solana mainnet (Jupiter).
    Solana(SolanaQuoteRequest),
}

/// `POST /trade/quote`.
#[derive(Debug, Clone)]
pub struct QuoteRequest {
    /// The chain.
    pub chain: Chain,
    /// The wallet whose allowance is checked, if named.
    pub from: Option<WalletAddress>,
    /// What is priced.
    pub pair: TradePair,
}

/// The chain of a trade: Solana only on mainnet.
fn trade_chain<'a>(chains: &'a Registry, slug: &str) -> Result<&'a Chain> {
    let chain = chain(chains, slug)?;
    if chain.family() == ChainFamily::Solana && chain.chain_id() != SOLANA_MAINNET {
        return Err(WalletOpsError::invalid(
            "chain",
            format!(
                "{} is not Solana mainnet: Solana trading is mainnet only (chain `solana`)",
                chain.slug()
            ),
        ));
    }
    Ok(chain)
}

/// A token field: an address of `family`, or `NATIVE` in any letter case for the native coin
/// as aggregators name it.
fn token(v: &mut Violations, family: ChainFamily, field: &str, raw: &str) -> Option<WalletAddress> {
    if raw.eq_ignore_ascii_case("NATIVE") {
        return Some(match family {
            ChainFamily::Evm => NATIVE_TOKEN.into(),
            ChainFamily::Solana => WRAPPED_SOL_MINT.into(),
        });
    }
    v.check(
        field,
        family
            .parse_address(raw)
            .map_err(|e| format!("{e}, or NATIVE")),
    )
}

/// A comma-separated list; empty entries dropped.
fn list(raw: Option<&String>) -> Vec<String> {
    non_empty(raw)
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl QuoteRequest {
    /// Parses `req` against `chains`.
    pub fn parse(chains: &Registry, req: &pb::GetQuoteRequest) -> Result<Self> {
        let chain = trade_chain(chains, &req.chain)?;
        let family = chain.family();
        let mut v = Violations::default();
        let src = token(&mut v, family, "fromToken", &req.from_token);
        let dst = token(&mut v, family, "toToken", &req.to_token);
        let kind = match family {
            ChainFamily::Evm => AmountKind::Uint256,
            ChainFamily::Solana => AmountKind::U64,
        };
        let amount = v.check("amount", parse_amount(&req.amount, kind));
        let from = optional_address(&mut v, family, "from", req.from.as_ref());
        let (protocols, excluded) = (
            list(req.protocols.as_ref()),
            list(req.exclude_protocols.as_ref()),
        );
        let evm = |a: WalletAddress| a.evm();
        let sol = |a: WalletAddress| a.solana();
        let pair =
            match (family, src, dst, amount) {
                (ChainFamily::Evm, Some(src), Some(dst), Some(amount)) => evm(src)
                    .zip(evm(dst))
                    .map(|(src, dst): (Address, Address)| {
                        TradePair::Evm(EvmQuoteRequest {
                            src,
                            dst,
                            amount,
                            include_gas: req.include_gas.unwrap_or(false),
                            protocols,
                            excluded_protocols: excluded,
                        })
                    }),
                (ChainFamily::Solana, Some(src), Some(dst), Some(amount)) => sol(src)
                    .zip(sol(dst))
                    .zip(u64::try_from(amount).ok())
                    .map(|((input_mint, output_mint), amount)| {
                        TradePair::Solana(SolanaQuoteRequest {
                            input_mint,
                            output_mint,
                            amount,
                            slippage: Slippage::DEFAULT,
                            dexes: protocols,
                            exclude_dexes: excluded,
                        })
                    }),
                _ => None,
            };
        v.conclude(pair.map(|pair| Self {
            chain: chain.clone(),
            from,
            pair,
        }))
    }
}
