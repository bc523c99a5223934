//! The Jupiter Swap API client (`/swap/v1`, the former `v6`): `GET {base}/quote` and
//! `POST {base}/swap`, with `x-api-key` when a key is configured (keyless hosts take none).
//! Mints are base58 strings, amounts u64 inside JSON strings, `slippageBps` a number.

use std::str::FromStr;

use async_trait::async_trait;
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use reqwest::{RequestBuilder, Url};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};
use solana_pubkey::Pubkey;
use solana_transaction::versioned::VersionedTransaction;

use super::config::SolanaTradeConfig;
use super::{
    HttpPolicy, SolanaAggregator, SolanaQuote, SolanaQuoteRequest, SolanaSwap, TradeError,
};
use crate::upstream::Upstream;
use walletops_domain::secret::Secret;

/// The option that holds the API key.
pub const API_KEY_OPTION: &str = "trade.solana.api_key";
/// One signature's base fee, in lamports.
const LAMPORTS_PER_SIGNATURE: u64 = 5_000;

/// A Jupiter client.
#[derive(Debug, Clone)]
pub struct Jupiter {
    upstream: Upstream,
    base_url: Url,
    api_key: Secret,
    /// The most priority fee Jupiter may put in a swap, in lamports.
    max_priority_fee: u64,
}

impl Jupiter {
    /// The client `config` describes. Its priority fee budget is `max_fee_lamports` less one
    /// signature's base fee, so a swap the wallet alone signs stays within the cap; the
    /// caller still checks the fee of what comes back.
    pub fn from_config(config: &SolanaTradeConfig, policy: HttpPolicy) -> anyhow::Result<Self> {
        Self::new(
            config.base_url.clone(),
            config.api_key.clone(),
            config
                .max_fee_lamports
                .saturating_sub(LAMPORTS_PER_SIGNATURE),
            policy,
        )
    }

    /// A client of the API at `base_url` (`https://api.jup.ag/swap/v1`, or a compatible
    /// server), with an empty `api_key` for keyless hosts.
    pub fn new(
        base_url: Url,
        api_key: Secret,
        max_priority_fee: u64,
        policy: HttpPolicy,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            upstream: Upstream::new("Jupiter", API_KEY_OPTION, policy, read_error)?,
            base_url,
            api_key,
            max_priority_fee,
        })
    }

    /// `{base}/{endpoint}`.
    fn url(&self, endpoint: &str) -> Url {
        let mut url = self.base_url.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push(endpoint);
        }
        url
    }

    /// Adds the key, when there is one.
    fn authorized(&self, request: RequestBuilder) -> RequestBuilder {
        if self.api_key.is_empty() {
            request
        } else {
            request.header("x-api-key", self.api_key.expose())
        }
    }
}

/// Jupiter's error body: `{"error": "<text>", "errorCode": "<CODE>"}`.
fn read_error(body: &Value) -> Option<(Option<String>, String)> {
    let text = body.get("error").and_then(Value::as_str)?;
    let code = body.get("errorCode").and_then(Value::as_str);
    Some((code.map(str::to_owned), text.to_owned()))
}

/// A u64 as Jupiter writes amounts: inside a string.
fn u64_string<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    String::deserialize(d)?
        .parse()
        .map_err(serde::de::Error::custom)
}

/// A base58 public key.
fn pubkey<'de, D: Deserializer<'de>>(d: D) -> Result<Pubkey, D::Error> {
    Pubkey::from_str(&String::deserialize(d)?).map_err(serde::de::Error::custom)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QuoteAnswer {
    #[serde(deserialize_with = "pubkey")]
    input_mint: Pubkey,
    #[serde(deserialize_with = "pubkey")]
    output_mint: Pubkey,
    #[serde(deserialize_with = "u64_string")]
    in_amount: u64,
    #[serde(deserialize_with = "u64_string")]
    out_amount: u64,
    #[serde(deserialize_with = "u64_string")]
    other_amount_threshold: u64,
    swap_mode: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SwapAnswer {
    swap_transaction: String,
    last_valid_block_height: u64,
    #[serde(default)]
    prioritization_fee_lamports: u64,
    #[serde(default)]
    compute_unit_limit: u32,
    #[serde(default)]
    simulation_error: Option<Value>,
}

#[async_trait]
impl SolanaAggregator for Jupiter {
    async fn quote(&self, request: &SolanaQuoteRequest) -> Result<SolanaQuote, TradeError> {
        let mut url = self.url("quote");
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("inputMint", &request.input_mint.to_string())
                .append_pair("outputMint", &request.output_mint.to_string())
                .append_pair("amount", &request.amount.to_string())
                .append_pair("slippageBps", &request.slippage.bps().to_string());
            if !request.dexes.is_empty() {
                query.append_pair("dexes", &request.dexes.join(","));
            }
            if !request.exclude_dexes.is_empty() {
                query.append_pair("excludeDexes", &request.exclude_dexes.join(","));
            }
        }
        let (answer, raw): (QuoteAnswer, _) = self
            .upstream
            .read("quote", || {
                self.authorized(self.upstream.http().get(url.clone()))
            })
            .await?;
        // A quote for another trade would be signed as if it were this one.
        if answer.input_mint != request.input_mint
            || answer.output_mint != request.output_mint
            || answer.in_amount != request.amount
            || answer.swap_mode != "ExactIn"
        {
            return Err(self
                .upstream
                .nonsense("quote", "answered with a quote for another trade"));
        }
        Ok(SolanaQuote {
            input_mint: answer.input_mint,
            output_mint: answer.output_mint,
            in_amount: answer.in_amount,
            out_amount: answer.out_amount,
            other_amount_threshold: answer.other_amount_threshold,
            raw,
        })
    }

    async fn build_swap(
        &self,
        quote: &SolanaQuote,
        user: &Pubkey,
    ) -> Result<SolanaSwap, TradeError> {
        let body = json!({
            "userPublicKey": user.to_string(),
            "quoteResponse": quote.raw,
            "wrapAndUnwrapSol": true,
            "dynamicComputeUnitLimit": true,
            "prioritizationFeeLamports": {
                "priorityLevelWithMaxLamports": {
                    "priorityLevel": "medium",
                    "maxLamports": self.max_priority_fee,
                }
            },
        });
        let url = self.url("swap");
        let (answer, raw): (SwapAnswer, _) = self
            .upstream
            .build("swap", || {
                self.authorized(self.upstream.http().post(url.clone()).json(&body))
            })
            .await?;
        // The compute unit simulation failed: the transaction would fail on chain too (an
        // empty balance, an expired route), and its fee would be spent for nothing.
        if let Some(error) = answer.simulation_error.filter(|e| !e.is_null()) {
            let (code, message) =
                read_error(&error).unwrap_or((None, "the swap failed in simulation".to_owned()));
            return Err(TradeError::Rejected {
                service: self.upstream.name,
                status: 200,
                code,
                message,
            });
        }
        let transaction = BASE64
            .decode(answer.swap_transaction.as_bytes())
            .ok()
            .and_then(|bytes| wincode::deserialize::<VersionedTransaction>(&bytes).ok())
            .ok_or_else(|| {
                self.upstream
                    .nonsense("swap", "sent a swap transaction that does not decode")
            })?;
        Ok(SolanaSwap {
            transaction,
            last_valid_block_height: answer.last_valid_block_height,
            prioritization_fee_lamports: answer.prioritization_fee_lamports,
            compute_unit_limit: answer.compute_unit_limit,
            raw,
        })
    }
}
