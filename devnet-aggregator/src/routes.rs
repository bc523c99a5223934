//! The 1inch v6.0 routes over the pool, and 1inch's error body.

use std::{collections::HashMap, str::FromStr, sync::Arc, time::Duration};

use alloy::{
    primitives::{Address, Bytes, U256},
    providers::Provider,
    rpc::types::TransactionRequest,
    sol_types::SolCall as _,
};
use axum::{
    Json, Router,
    extract::{Path, Query, Request, State as Extract},
    http::{StatusCode, header::AUTHORIZATION},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::{Value, json};

use crate::{
    Fault, NATIVE, State,
    pool::{self, IERC20, SwapPool, amount_out, min_out},
};

/// How long a stalled request waits before it answers anyway.
const STALL_FOR: Duration = Duration::from_secs(60);
/// The gas a quote reports when asked: what a pool swap costs, with room.
const QUOTE_GAS: u64 = 120_000;
/// The protocol id quotes name.
const PROTOCOL: &str = "WALLETOPS_SWAP_POOL";

type Shared = Arc<State>;
type Params = Query<HashMap<String, String>>;

pub(crate) fn router(state: Shared) -> Router {
    Router::new()
        .route("/swap/v6.0/{chain}/quote", get(quote))
        .route("/swap/v6.0/{chain}/swap", get(swap))
        .route("/swap/v6.0/{chain}/approve/spender", get(spender))
        .route("/swap/v6.0/{chain}/approve/allowance", get(allowance))
        .route(
            "/swap/v6.0/{chain}/approve/transaction",
            get(approve_transaction),
        )
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// A 1inch error answer: `{error, description, statusCode, requestId, meta}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    description: String,
    meta: Vec<(&'static str, String)>,
}

impl ApiError {
    fn bad_request(description: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            description: description.into(),
            meta: Vec::new(),
        }
    }

    fn internal(description: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            description: description.into(),
            meta: Vec::new(),
        }
    }

    fn with_meta(mut self, kind: &'static str, value: impl ToString) -> Self {
        self.meta.push((kind, value.to_string()));
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let meta: Vec<Value> = self
            .meta
            .iter()
            .map(|(kind, value)| json!({"type": kind, "value": value}))
            .collect();
        let body = json!({
            "error": self.status.canonical_reason().unwrap_or("Error"),
            "description": self.description,
            "statusCode": self.status.as_u16(),
            "requestId": uuid::Uuid::new_v4().to_string(),
            "meta": meta,
        });
        (self.status, Json(body)).into_response()
    }
}

/// A node read that failed is the aggregator's own failure.
fn node_failed(err: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!("node call failed: {err}"))
}

type Answer = Result<Json<Value>, ApiError>;

/// Faults first (an outage hits everyone), then the key.
async fn guard(Extract(state): Extract<Shared>, request: Request, next: Next) -> Response {
    match state.faults.take() {
        Some(Fault::Stall) => {
            tokio::time::sleep(STALL_FOR).await;
            return ApiError::internal("stalled").into_response();
        }
        Some(Fault::Fail) => return ApiError::internal("internal error").into_response(),
        None => {}
    }
    let authorized = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|key| !key.trim().is_empty());
    if !authorized {
        return ApiError {
            status: StatusCode::UNAUTHORIZED,
            description: "missing or invalid API key".to_owned(),
            meta: Vec::new(),
        }
        .into_response();
    }
    next.run(request).await
}

/// Refuses a path for another chain.
fn check_chain(state: &State, chain: &str) -> Result<(), ApiError> {
    if chain.parse::<u64>().ok() == Some(state.chain_id) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "chain {chain} is not supported"
        )))
    }
}

fn required<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str, ApiError> {
    params
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| ApiError::bad_request(format!("{name} is required")))
}

fn address(params: &HashMap<String, String>, name: &str) -> Result<Address, ApiError> {
    let raw = required(params, name)?;
    Address::from_str(raw)
        .map_err(|_| ApiError::bad_request(format!("{name} is not a valid address")))
}

fn flag(params: &HashMap<String, String>, name: &str) -> bool {
    params.get(name).is_some_and(|v| v == "true")
}

/// A trade the pool can make: one side native, the other the pool's token.
struct Trade {
    native_in: bool,
    src: Address,
    dst: Address,
    amount: U256,
    dst_amount: U256,
}

/// Reads and prices `src`, `dst` and `amount`, with 1inch's refusals.
async fn price(state: &State, params: &HashMap<String, String>) -> Result<Trade, ApiError> {
    let src = address(params, "src")?;
    let dst = address(params, "dst")?;
    let amount = U256::from_str_radix(required(params, "amount")?, 10)
        .map_err(|_| ApiError::bad_request("amount is not a valid integer"))?;
    if src == dst {
        return Err(ApiError::bad_request("src and dst should be different"));
    }
    for token in [src, dst] {
        if state.faults.is_refused(&token) || (token != NATIVE && token != state.token) {
            return Err(ApiError::bad_request("not valid token").with_meta("token", token));
        }
    }
    if amount.is_zero() {
        return Err(ApiError::bad_request("amount must be positive").with_meta("amount", amount));
    }
    let native_in = src == NATIVE;
    let (native, token) = pool::reserves(&state.node, state.pool)
        .await
        .map_err(node_failed)?;
    let (reserve_in, reserve_out) = if native_in {
        (native, token)
    } else {
        (token, native)
    };
    match amount_out(amount, reserve_in, reserve_out) {
        Some(out) if !out.is_zero() => Ok(Trade {
            native_in,
            src,
            dst,
            amount,
            dst_amount: state.faults.dst_amount(out),
        }),
        _ => Err(ApiError::bad_request("insufficient liquidity").with_meta("amount", amount)),
    }
}

/// `TokenInfo` of the native coin or the pool's token.
async fn token_info(state: &State, token: Address) -> Result<Value, ApiError> {
    if token == NATIVE {
        return Ok(json!({
            "address": lower(NATIVE), "symbol": "ETH", "name": "Ether", "decimals": 18,
            "logoURI": "", "tags": ["native"],
        }));
    }
    let node = &state.node;
    let symbol = pool::view(node, token, IERC20::symbolCall {})
        .await
        .map_err(node_failed)?;
    let name = pool::view(node, token, IERC20::nameCall {})
        .await
        .map_err(node_failed)?;
    let decimals = pool::view(node, token, IERC20::decimalsCall {})
        .await
        .map_err(node_failed)?;
    Ok(json!({
        "address": lower(token), "symbol": symbol, "name": name, "decimals": decimals,
        "logoURI": "", "tags": ["tokens"],
    }))
}

/// Addresses as 1inch writes them: lowercase hex.
fn lower(address: Address) -> String {
    format!("{address:#x}")
}

/// The quote body: `dstAmount`, plus what the include flags ask for.
async fn body(
    state: &State,
    params: &HashMap<String, String>,
    trade: &Trade,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let mut body = serde_json::Map::new();
    body.insert("dstAmount".into(), json!(trade.dst_amount.to_string()));
    if flag(params, "includeTokensInfo") {
        body.insert("srcToken".into(), token_info(state, trade.src).await?);
        body.insert("dstToken".into(), token_info(state, trade.dst).await?);
    }
    if flag(params, "includeProtocols") {
        body.insert(
            "protocols".into(),
            json!([[[{"name": PROTOCOL, "part": 100,
                      "fromTokenAddress": lower(trade.src), "toTokenAddress": lower(trade.dst)}]]]),
        );
    }
    Ok(body)
}

async fn quote(
    Extract(state): Extract<Shared>,
    Path(chain): Path<String>,
    Query(params): Params,
) -> Answer {
    check_chain(&state, &chain)?;
    let trade = price(&state, &params).await?;
    let mut body = body(&state, &params, &trade).await?;
    if flag(&params, "includeGas") {
        body.insert("gas".into(), json!(QUOTE_GAS));
    }
    Ok(Json(Value::Object(body)))
}

/// `slippage` as a percent (0 to 50, decimals allowed) in basis points.
fn slippage_bps(params: &HashMap<String, String>) -> Result<u16, ApiError> {
    let percent: f64 = required(params, "slippage")?
        .parse()
        .map_err(|_| ApiError::bad_request("slippage is not a number"))?;
    if !(0.0..=50.0).contains(&percent) {
        return Err(ApiError::bad_request("slippage must be between 0 and 50"));
    }
    // At most 5000 after the check above.
    Ok((percent * 100.0).round() as u16)
}

async fn swap(
    Extract(state): Extract<Shared>,
    Path(chain): Path<String>,
    Query(params): Params,
) -> Answer {
    check_chain(&state, &chain)?;
    let trade = price(&state, &params).await?;
    let from = address(&params, "from")?;
    // 1inch's generated types require `origin`; the pool ignores it.
    address(&params, "origin")?;
    if params
        .get("receiver")
        .is_some_and(|r| Address::from_str(r).ok() != Some(from))
    {
        return Err(ApiError::bad_request(
            "receiver other than from is not supported",
        ));
    }
    let minimum = min_out(trade.dst_amount, slippage_bps(&params)?);
    let node = &state.node;
    let estimate = !flag(&params, "disableEstimate");
    if estimate {
        let balance = if trade.native_in {
            node.get_balance(from).await.map_err(node_failed)?
        } else {
            pool::view(node, state.token, IERC20::balanceOfCall { owner: from })
                .await
                .map_err(node_failed)?
        };
        if balance < trade.amount {
            return Err(ApiError::bad_request("Not enough balance")
                .with_meta("amount", trade.amount)
                .with_meta("balance", balance));
        }
        if !trade.native_in {
            let allowed = pool::view(
                node,
                state.token,
                IERC20::allowanceCall {
                    owner: from,
                    spender: state.pool,
                },
            )
            .await
            .map_err(node_failed)?;
            if allowed < trade.amount {
                return Err(ApiError::bad_request(format!(
                    "Not enough allowance. Amount: {}. Allowance: {allowed}. Spender: {}",
                    trade.amount,
                    lower(state.pool)
                ))
                .with_meta("amount", trade.amount)
                .with_meta("allowance", allowed));
            }
        }
    }
    // A swap routed elsewhere names that router as its executor, as a real route does.
    let (to, extra, replaced) = state.faults.tamper(state.pool);
    let desc = pool::SwapDescription {
        srcToken: trade.src,
        dstToken: trade.dst,
        srcReceiver: state.faults.src_receiver(to),
        dstReceiver: from,
        amount: trade.amount,
        minReturnAmount: minimum,
        flags: U256::ZERO,
    };
    let data = SwapPool::swapCall {
        executor: to,
        desc,
        data: Bytes::new(),
    }
    .abi_encode();
    let value = if trade.native_in {
        trade.amount
    } else {
        U256::ZERO
    };
    // Estimated as built, tampering included, and for the value the swap needs.
    let data = replaced.unwrap_or_else(|| Bytes::from(data));
    let gas = if estimate {
        let request = TransactionRequest::default()
            .from(from)
            .to(to)
            .input(data.clone().into())
            .value(value);
        let estimated = node
            .estimate_gas(request)
            .await
            .map_err(|_| ApiError::bad_request("cannot estimate"))?;
        // Room for the reserves to move between the estimate and the swap.
        estimated.saturating_mul(12) / 10
    } else {
        0
    };
    let gas_price = node.get_gas_price().await.map_err(node_failed)?;
    let mut body = body(&state, &params, &trade).await?;
    body.insert(
        "tx".into(),
        json!({
            "from": lower(from),
            "to": lower(to),
            "data": data.to_string(),
            "value": (value + extra).to_string(),
            "gas": gas,
            "gasPrice": gas_price.to_string(),
        }),
    );
    Ok(Json(Value::Object(body)))
}

async fn spender(Extract(state): Extract<Shared>, Path(chain): Path<String>) -> Answer {
    check_chain(&state, &chain)?;
    Ok(Json(json!({"address": lower(state.pool)})))
}

/// The pool's token, named by `tokenAddress`; anything else has no allowance to speak of.
fn pool_token(state: &State, params: &HashMap<String, String>) -> Result<Address, ApiError> {
    let token = address(params, "tokenAddress")?;
    if token != state.token || state.faults.is_refused(&token) {
        return Err(ApiError::bad_request("not valid token").with_meta("token", token));
    }
    Ok(token)
}

async fn allowance(
    Extract(state): Extract<Shared>,
    Path(chain): Path<String>,
    Query(params): Params,
) -> Answer {
    check_chain(&state, &chain)?;
    let token = pool_token(&state, &params)?;
    let wallet = address(&params, "walletAddress")?;
    let allowed = pool::view(
        &state.node,
        token,
        IERC20::allowanceCall {
            owner: wallet,
            spender: state.pool,
        },
    )
    .await
    .map_err(node_failed)?;
    Ok(Json(json!({"allowance": allowed.to_string()})))
}

async fn approve_transaction(
    Extract(state): Extract<Shared>,
    Path(chain): Path<String>,
    Query(params): Params,
) -> Answer {
    check_chain(&state, &chain)?;
    let token = pool_token(&state, &params)?;
    let amount = match params.get("amount") {
        Some(raw) => U256::from_str_radix(raw, 10)
            .map_err(|_| ApiError::bad_request("amount is not a valid integer"))?,
        None => U256::MAX,
    };
    let data = IERC20::approveCall {
        spender: state.pool,
        amount,
    }
    .abi_encode();
    let gas_price = state.node.get_gas_price().await.map_err(node_failed)?;
    Ok(Json(json!({
        "data": Bytes::from(data).to_string(),
        "gasPrice": gas_price.to_string(),
        "to": lower(token),
        "value": "0",
    })))
}
