//! The 1inch Classic Swap API v6.0 client: `GET {base}/swap/v6.0/{chainId}/quote`, `/swap`,
//! `/approve/spender` and `/approve/allowance`, with `Authorization: Bearer <key>`. Query
//! names and answer fields are v6.0's (`src`, `dst`, `dstAmount`; not v5's `fromTokenAddress`
//! or `toAmount`); amounts travel as decimal strings, `gas` as a JSON number.

use alloy::primitives::{Address, Bytes, U256};
use async_trait::async_trait;
use reqwest::{RequestBuilder, Url};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::config::EvmTradeConfig;
use super::{
    EvmAggregator, EvmChainId, EvmQuote, EvmQuoteRequest, EvmSwap, EvmSwapRequest, EvmSwapTx,
    HttpPolicy, TradeError,
};
use crate::upstream::Upstream;
use walletops_domain::secret::Secret;

/// The option that holds the API key: without it there is no EVM trading.
pub const API_KEY_OPTION: &str = "trade.evm.api_key";
/// The API version in every path.
const VERSION: &str = "v6.0";

/// A 1inch client.
#[derive(Debug, Clone)]
pub struct OneInch {
    upstream: Upstream,
    base_url: Url,
    api_key: Secret,
}

impl OneInch {
    /// The client `config` describes, or none without an API key.
    pub fn from_config(
        config: &EvmTradeConfig,
        policy: HttpPolicy,
    ) -> anyhow::Result<Option<Self>> {
        if config.api_key.is_empty() {
            return Ok(None);
        }
        Self::new(config.base_url.clone(), config.api_key.clone(), policy).map(Some)
    }

    /// A client of the API at `base_url` (`https://api.1inch.dev`, or a compatible server).
    pub fn new(base_url: Url, api_key: Secret, policy: HttpPolicy) -> anyhow::Result<Self> {
        Ok(Self {
            upstream: Upstream::new("1inch", API_KEY_OPTION, policy, read_error)?,
            base_url,
            api_key,
        })
    }

    /// `GET {base}/swap/v6.0/{chain}/{endpoint...}?{query}` with the key.
    fn get(
        &self,
        chain: EvmChainId,
        endpoint: &[&str],
        query: &[(&str, String)],
    ) -> RequestBuilder {
        let mut url = self.base_url.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend(["swap", VERSION, &chain.get().to_string()])
                .extend(endpoint);
        }
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (k, v.as_str())));
        }
        self.upstream
            .http()
            .get(url)
            .bearer_auth(self.api_key.expose())
    }
}

/// The query of a quote, shared by `/quote` and `/swap`.
fn trade_query(trade: &EvmQuoteRequest) -> Vec<(&'static str, String)> {
    let mut query = vec![
        ("src", trade.src.to_string()),
        ("dst", trade.dst.to_string()),
        ("amount", trade.amount.to_string()),
    ];
    if !trade.protocols.is_empty() {
        query.push(("protocols", trade.protocols.join(",")));
    }
    if !trade.excluded_protocols.is_empty() {
        query.push(("excludedProtocols", trade.excluded_protocols.join(",")));
    }
    if trade.include_gas {
        query.push(("includeGas", "true".to_owned()));
    }
    query
}

/// 1inch's error body: `{error, description, statusCode, requestId, meta}`; the
/// `description` is the part that says what is wrong.
fn read_error(body: &Value) -> Option<(Option<String>, String)> {
    let text = body
        .get("description")
        .or_else(|| body.get("error"))
        .and_then(Value::as_str)?;
    Some((None, text.to_owned()))
}

/// A uint256 as 1inch writes it: a decimal string.
fn decimal<'de, D: Deserializer<'de>>(d: D) -> Result<U256, D::Error> {
    let text = String::deserialize(d)?;
    U256::from_str_radix(&text, 10).map_err(serde::de::Error::custom)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QuoteAnswer {
    #[serde(deserialize_with = "decimal")]
    dst_amount: U256,
    gas: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SwapAnswer {
    #[serde(deserialize_with = "decimal")]
    dst_amount: U256,
    tx: TxAnswer,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TxAnswer {
    from: Address,
    to: Address,
    data: Bytes,
    #[serde(deserialize_with = "decimal")]
    value: U256,
    #[serde(default)]
    gas: u64,
    #[serde(deserialize_with = "decimal")]
    gas_price: U256,
}

#[derive(Deserialize)]
struct SpenderAnswer {
    address: Address,
}

#[derive(Deserialize)]
struct AllowanceAnswer {
    #[serde(deserialize_with = "decimal")]
    allowance: U256,
}

#[async_trait]
impl EvmAggregator for OneInch {
    async fn quote(
        &self,
        chain: EvmChainId,
        request: &EvmQuoteRequest,
    ) -> Result<EvmQuote, TradeError> {
        let query = trade_query(request);
        let (answer, raw): (QuoteAnswer, _) = self
            .upstream
            .read("quote", || self.get(chain, &["quote"], &query))
            .await?;
        Ok(EvmQuote {
            dst_amount: answer.dst_amount,
            gas: answer.gas,
            raw,
        })
    }

    async fn build_swap(
        &self,
        chain: EvmChainId,
        request: &EvmSwapRequest,
    ) -> Result<EvmSwap, TradeError> {
        let mut query = trade_query(&request.trade);
        query.extend([
            ("from", request.from.to_string()),
            // The wallet signs and sends the swap itself: it is the origin too.
            ("origin", request.from.to_string()),
            ("slippage", request.slippage.percent()),
        ]);
        if request.disable_estimate {
            query.push(("disableEstimate", "true".to_owned()));
        }
        let (answer, raw): (SwapAnswer, _) = self
            .upstream
            .build("swap", || self.get(chain, &["swap"], &query))
            .await?;
        let tx = answer.tx;
        Ok(EvmSwap {
            dst_amount: answer.dst_amount,
            tx: EvmSwapTx {
                from: tx.from,
                to: tx.to,
                data: tx.data,
                value: tx.value,
                gas: tx.gas,
                gas_price: tx.gas_price,
            },
            raw,
        })
    }

    async fn spender(&self, chain: EvmChainId) -> Result<Address, TradeError> {
        let (answer, _): (SpenderAnswer, _) = self
            .upstream
            .read("approve/spender", || {
                self.get(chain, &["approve", "spender"], &[])
            })
            .await?;
        Ok(answer.address)
    }

    async fn allowance(
        &self,
        chain: EvmChainId,
        token: Address,
        wallet: Address,
    ) -> Result<U256, TradeError> {
        let query = [
            ("tokenAddress", token.to_string()),
            ("walletAddress", wallet.to_string()),
        ];
        let (answer, _): (AllowanceAnswer, _) = self
            .upstream
            .read("approve/allowance", || {
                self.get(chain, &["approve", "allowance"], &query)
            })
            .await?;
        Ok(answer.allowance)
    }
}
