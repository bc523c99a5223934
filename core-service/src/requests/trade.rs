//! The trade requests: quotes and swaps, parsed for their chain's family. `NATIVE`, in any letter case,
//! is resolved here to the address aggregators use for the chain's native coin.

use alloy::primitives::Address;
use walletops_proto::v1 as pb;

use super::{chain, non_empty, optional_address};
use crate::error::{Result, Violations, WalletOpsError};
use walletops_chains::{
    Chain, Registry,
    trade::{EvmQuoteRequest, NATIVE_TOKEN, Slippage, SolanaQuoteRequest, WRAPPED_SOL_MINT},
};
use walletops_domain::{AmountKind, ChainFamily, WalletAddress, parse_amount};

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

/// The fields a quote and a swap share, as received.
struct Fields<'a> {
    chain: &'a str,
    from: Option<&'a String>,
    from_token: &'a str,
    to_token: &'a str,
    amount: &'a str,
    include_gas: Option<bool>,
    protocols: Option<&'a String>,
    exclude_protocols: Option<&'a String>,
}

impl QuoteRequest {
    /// Parses `req` against `chains`.
    pub fn parse(chains: &Registry, req: &pb::GetQuoteRequest) -> Result<Self> {
        let fields = Fields {
            chain: &req.chain,
            from: req.from.as_ref(),
            from_token: &req.from_token,
            to_token: &req.to_token,
            amount: &req.amount,
            include_gas: req.include_gas,
            protocols: req.protocols.as_ref(),
            exclude_protocols: req.exclude_protocols.as_ref(),
        };
        let mut v = Violations::default();
        let quote = Self::parse_fields(chains, &fields, Slippage::DEFAULT, &mut v)?;
        v.conclude(quote)
    }

    /// Parses `f` into `v`: the request when every field is good.
    fn parse_fields(
        chains: &Registry,
        f: &Fields<'_>,
        slippage: Slippage,
        v: &mut Violations,
    ) -> Result<Option<Self>> {
        let chain = trade_chain(chains, f.chain)?;
        let family = chain.family();
        let src = token(v, family, "fromToken", f.from_token);
        let dst = token(v, family, "toToken", f.to_token);
        let kind = match family {
            ChainFamily::Evm => AmountKind::Uint256,
            ChainFamily::Solana => AmountKind::U64,
        };
        let amount = v.check("amount", parse_amount(f.amount, kind));
        let from = optional_address(v, family, "from", f.from);
        let (protocols, excluded) = (list(f.protocols), list(f.exclude_protocols));
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
                            include_gas: f.include_gas.unwrap_or(false),
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
                            slippage,
                            dexes: protocols,
                            exclude_dexes: excluded,
                        })
                    }),
                _ => None,
            };
        Ok(pair.map(|pair| Self {
            chain: chain.clone(),
            from,
            pair,
        }))
    }
}

/// `POST /trade/swap`: a quote to execute from a delegated wallet, with the slippage the
/// caller accepts.
#[derive(Debug, Clone)]
pub struct SwapRequest {
    /// What is traded, and from which wallet (`None`: the caller's default).
    pub trade: QuoteRequest,
    /// The slippage accepted: a percentage in (0, 50], default 1.
    pub slippage: Slippage,
    /// The quote it is held to (`quoteId`), if named.
    pub quote_id: Option<uuid::Uuid>,
    /// The least of the bought token it must pay (`minDstAmount`), if named.
    pub min_dst: Option<alloy::primitives::U256>,
    /// What the named quote priced to come in, once `Quotes::named_by` read it.
    pub quoted: Option<alloy::primitives::U256>,
}

impl SwapRequest {
    /// Parses `req` against `chains`.
    pub fn parse(chains: &Registry, req: &pb::SwapRequest) -> Result<Self> {
        let fields = Fields {
            chain: &req.chain,
            from: req.from.as_ref(),
            from_token: &req.from_token,
            to_token: &req.to_token,
            amount: &req.amount,
            include_gas: req.include_gas,
            protocols: req.protocols.as_ref(),
            exclude_protocols: req.exclude_protocols.as_ref(),
        };
        let mut v = Violations::default();
        let slippage = match req.slippage {
            None => Some(Slippage::DEFAULT),
            Some(percent) if percent <= 0.0 => {
                v.push("slippage", "must be a percentage above 0 and at most 50");
                None
            }
            Some(percent) => v.check("slippage", Slippage::from_percent(percent)),
        };
        let trade = QuoteRequest::parse_fields(
            chains,
            &fields,
            slippage.unwrap_or(Slippage::DEFAULT),
            &mut v,
        )?;
        let quote_id = non_empty(req.quote_id.as_ref()).and_then(|raw| {
            v.check(
                "quoteId",
                uuid::Uuid::parse_str(raw)
                    .map_err(|_| "must be the quoteId of a quote's answer (a UUID)".to_owned()),
            )
        });
        let kind = match trade.as_ref().map(|t| t.chain.family()) {
            Some(ChainFamily::Solana) => AmountKind::U64,
            _ => AmountKind::Uint256,
        };
        let min_dst = match non_empty(req.min_dst_amount.as_ref()) {
            None => Some(None),
            Some(raw) => v.check("minDstAmount", parse_amount(raw, kind)).map(Some),
        };
        let built = trade
            .zip(slippage)
            .zip(min_dst)
            .map(|((trade, slippage), min_dst)| Self {
                trade,
                slippage,
                quote_id,
                min_dst,
                quoted: None,
            });
        v.conclude(built)
    }
}

impl SwapRequest {
    /// The token it buys; `None` for the native coin (wrapped SOL on Solana).
    pub fn bought(&self) -> Option<WalletAddress> {
        match &self.trade.pair {
            TradePair::Evm(p) => (p.dst != NATIVE_TOKEN).then_some(WalletAddress::Evm(p.dst)),
            TradePair::Solana(p) => {
                (p.output_mint != WRAPPED_SOL_MINT).then_some(WalletAddress::Solana(p.output_mint))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chains() -> Registry {
        Registry::new(&Default::default()).expect("the built-in chains")
    }

    /// The fields an INVALID_INPUT names.
    fn fields(err: WalletOpsError) -> Vec<String> {
        match err {
            WalletOpsError::InvalidInput(v) => v.into_iter().map(|f| f.field).collect(),
            other => panic!("not INVALID_INPUT: {other:?}"),
        }
    }

    fn swap(chain: &str, slippage: Option<f64>) -> pb::SwapRequest {
        pb::SwapRequest {
            chain: chain.to_owned(),
            from_token: "native".to_owned(),
            to_token: "0x1111111111111111111111111111111111111111".to_owned(),
            amount: "0x10".to_owned(),
            slippage,
            ..Default::default()
        }
    }

    #[test]
    fn native_resolves_in_any_case_and_slippage_defaults_to_one_percent() {
        let req = SwapRequest::parse(&chains(), &swap("base", None)).expect("valid");
        assert_eq!(req.slippage, Slippage::DEFAULT);
        let TradePair::Evm(pair) = req.trade.pair else {
            panic!("an EVM pair")
        };
        assert_eq!(pair.src, NATIVE_TOKEN);
        assert_eq!(pair.amount, alloy::primitives::U256::from(16));
    }

    #[test]
    fn slippage_is_a_percentage_above_zero_and_at_most_fifty() {
        for bad in [0.0, -1.0, 50.01, f64::NAN] {
            let err = SwapRequest::parse(&chains(), &swap("base", Some(bad))).expect_err("bad");
            assert_eq!(fields(err), ["slippage"], "{bad}");
        }
        assert!(SwapRequest::parse(&chains(), &swap("base", Some(50.0))).is_ok());
        assert!(SwapRequest::parse(&chains(), &swap("base", Some(0.5))).is_ok());
    }

    #[test]
    fn solana_trades_on_mainnet_only() {
        for cluster in ["solana-devnet", "solana-testnet"] {
            let err = SwapRequest::parse(&chains(), &swap(cluster, None)).expect_err("refused");
            assert_eq!(fields(err), ["chain"], "{cluster}");
        }
        let quote = pb::GetQuoteRequest {
            chain: "solana".to_owned(),
            from_token: "NATIVE".to_owned(),
            to_token: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v".to_owned(),
            amount: "1000".to_owned(),
            ..Default::default()
        };
        let req = QuoteRequest::parse(&chains(), &quote).expect("mainnet");
        let TradePair::Solana(pair) = req.pair else {
            panic!("a Solana pair")
        };
        assert_eq!(pair.input_mint, WRAPPED_SOL_MINT);
        let hex = pb::GetQuoteRequest {
            amount: "0x10".to_owned(),
            ..quote
        };
        let err = QuoteRequest::parse(&chains(), &hex).expect_err("u64 decimal only");
        assert_eq!(fields(err), ["amount"]);
    }
}
