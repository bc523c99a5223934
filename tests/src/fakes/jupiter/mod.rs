//! A fake Jupiter Swap API (`GET /quote`, `POST /swap`, served under `/swap/v1` and at the
//! root, as the current and the legacy hosts lay them out) over one pool on the Solana test
//! node: a keypair the fake holds, with SOL and one SPL token.
//!
//! Quotes are constant-product over the pool's balances read from the node (its lamports
//! above the rent-exempt minimum, its token account), less a 0.3% fee, in Jupiter's quote
//! shape. `/swap` builds a real v0 `VersionedTransaction` over a fresh blockhash of the
//! node: the wallet (`userPublicKey`) pays the fee and is the one missing signature; the pool
//! has signed already. Selling SOL, it moves the quote's `inAmount` lamports from the wallet
//! to the pool and its `outAmount` of the token from the pool to the wallet's associated
//! token account (created if missing); selling the token, the reverse. It honours the quote
//! as given: the real API would re-route, a fake only needs to move what it quoted.
//!
//! Failures in Jupiter's body (`{"error", "errorCode"}`): `TOKEN_NOT_TRADABLE` for a mint
//! marked so, `COULD_NOT_FIND_ANY_ROUTE` for a pair other than SOL and the pool's token (or
//! when told to), `CIRCULAR_ARBITRAGE_IS_DISABLED` for equal mints; and on request a 500 or
//! a stall (`JupiterFaults`).

mod faults;

pub use faults::{Extra, JupiterFaults, STRANGER};

use std::{collections::HashMap, net::SocketAddr, str::FromStr, sync::Arc, time::Duration};

use anyhow::Context as _;
use axum::{
    Json, Router,
    body::Bytes,
    extract::{Query, Request, State},
    http::StatusCode,
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use serde_json::{Value, json};
use solana_compute_budget_interface::ComputeBudgetInstruction;
use solana_keypair::Keypair;
use solana_message::{VersionedMessage, v0};
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signature::Signature;
use solana_signer::Signer as _;
use solana_transaction::{Instruction, versioned::VersionedTransaction};
use spl_associated_token_account_interface::{
    address::get_associated_token_address_with_program_id,
    instruction::create_associated_token_account_idempotent,
};
use spl_token_2022_interface::{
    extension::StateWithExtensions, instruction::transfer_checked, state::Mint,
};
use tokio::task::JoinHandle;

/// The wrapped SOL mint, which stands for SOL in quotes.
pub const WRAPPED_SOL: Pubkey =
    solana_pubkey::pubkey!("So11111111111111111111111111111111111111112");
/// The compute unit limit every swap sets.
pub const COMPUTE_UNIT_LIMIT: u32 = 200_000;
/// The compute unit price every swap pays, in micro-lamports.
pub const COMPUTE_UNIT_PRICE: u64 = 1_000;
/// How long a stalled request waits before it answers anyway.
const STALL_FOR: Duration = Duration::from_secs(60);

/// A running fake, stopped when dropped.
#[derive(Debug)]
pub struct JupiterFake {
    addr: SocketAddr,
    pool: Pubkey,
    vault: Pubkey,
    faults: JupiterFaults,
    server: JoinHandle<()>,
}

impl Drop for JupiterFake {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// What the handlers share.
struct Venue {
    rpc: RpcClient,
    pool: Keypair,
    /// Where what is sold goes: an address derived for a program (off the curve, so no key
    /// holds it), as an AMM's vaults are; its SOL and its token account count in the pool's
    /// reserves.
    vault: Pubkey,
    mint: Pubkey,
    token_program: Pubkey,
    decimals: u8,
    faults: JupiterFaults,
}

type Shared = Arc<Venue>;

impl JupiterFake {
    /// Serves on 127.0.0.1 a venue between SOL and `mint` held by `pool` on the node at
    /// `rpc_url`. The pool must hold SOL and an associated token account of `mint`.
    pub async fn start(rpc_url: &str, pool: Keypair, mint: Pubkey) -> anyhow::Result<Self> {
        let rpc = RpcClient::new(rpc_url.to_owned());
        let account = rpc.get_account(&mint).await.context("reading the mint")?;
        let state = StateWithExtensions::<Mint>::unpack(&account.data)
            .map_err(|e| anyhow::anyhow!("{mint} is not a mint: {e}"))?;
        let faults = JupiterFaults::default();
        let pool_key = pool.pubkey();
        let (vault, _) =
            Pubkey::find_program_address(&[b"vault", pool_key.as_ref()], &VAULT_PROGRAM);
        open_vault(&rpc, &pool, &vault, (&mint, &account.owner)).await?;
        let venue = Arc::new(Venue {
            rpc,
            pool,
            vault,
            mint,
            token_program: account.owner,
            decimals: state.base.decimals,
            faults: faults.clone(),
        });
        let api = Router::new()
            .route("/quote", get(quote))
            .route("/swap", post(swap));
        let app = Router::new()
            .nest("/swap/v1", api.clone())
            .merge(api)
            .layer(middleware::from_fn_with_state(venue.clone(), guard))
            .with_state(venue);
        let (addr, server) = super::serve_on_loopback(app).await?;
        Ok(Self {
            addr,
            pool: pool_key,
            vault,
            faults,
            server,
        })
    }

    /// A fresh SPL Token mint of `decimals` and a pool holding `lamports` and `tokens` of it
    /// on `node`, served by a new fake: the fake and the mint.
    pub async fn with_new_pool(
        node: &crate::solana_node::SolanaNode,
        lamports: u64,
        tokens: u64,
        decimals: u8,
    ) -> anyhow::Result<(Self, Pubkey)> {
        let rpc = RpcClient::new(node.url());
        let authority = Keypair::new();
        node.airdrop(&authority.pubkey(), 10_000_000_000)?;
        let mint =
            crate::solana_node::create_mint(&rpc, &authority, &spl_token_interface::ID, decimals)
                .await?;
        let pool = Keypair::new();
        node.airdrop(&pool.pubkey(), lamports)?;
        crate::solana_node::mint_to(&rpc, &authority, &mint, &pool.pubkey(), tokens).await?;
        Ok((Self::start(&node.url(), pool, mint).await?, mint))
    }

    /// The base URL a client appends `/quote` and `/swap` to: `http://<addr>/swap/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/swap/v1", self.addr)
    }

    /// The pool's address.
    pub fn pool(&self) -> Pubkey {
        self.pool
    }

    /// Where what the pool is sold goes: an address derived for a program, with its token
    /// account of the pool's mint.
    pub fn vault(&self) -> Pubkey {
        self.vault
    }

    /// The switches for its failures.
    pub fn faults(&self) -> &JupiterFaults {
        &self.faults
    }
}

/// A Jupiter error answer.
#[derive(Debug)]
struct JupError {
    status: StatusCode,
    code: &'static str,
    text: String,
}

impl JupError {
    fn bad(code: &'static str, text: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code,
            text: text.into(),
        }
    }

    fn internal(text: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "INTERNAL_SERVER_ERROR",
            text: text.into(),
        }
    }
}

impl IntoResponse for JupError {
    fn into_response(self) -> Response {
        let body = json!({"error": self.text, "errorCode": self.code});
        (self.status, Json(body)).into_response()
    }
}

/// A node call that failed is the fake's own failure.
fn node_failed(err: impl std::fmt::Display) -> JupError {
    JupError::internal(format!("node call failed: {err}"))
}

async fn guard(State(venue): State<Shared>, request: Request, next: Next) -> Response {
    let fault = {
        let mut state = venue.faults.lock();
        state.requests += 1;
        if state.stall > 0 {
            state.stall -= 1;
            Some(true)
        } else if state.fail > 0 {
            state.fail -= 1;
            Some(false)
        } else {
            None
        }
    };
    match fault {
        Some(true) => {
            tokio::time::sleep(STALL_FOR).await;
            JupError::internal("stalled").into_response()
        }
        Some(false) => JupError::internal("Internal Server Error").into_response(),
        None => next.run(request).await,
    }
}

/// A trade the pool can make.
struct Trade {
    input: Pubkey,
    output: Pubkey,
    sell_sol: bool,
}

impl Venue {
    /// Checks a pair as Jupiter would.
    fn trade(&self, input: Pubkey, output: Pubkey) -> Result<Trade, JupError> {
        if input == output {
            return Err(JupError::bad(
                "CIRCULAR_ARBITRAGE_IS_DISABLED",
                "Input and output mints are not allowed to be equal",
            ));
        }
        let faults = self.faults.lock();
        if let Some(mint) = [input, output]
            .iter()
            .find(|m| faults.untradable.contains(m))
        {
            return Err(JupError::bad(
                "TOKEN_NOT_TRADABLE",
                format!("The token {mint} is not tradable"),
            ));
        }
        let sell_sol = input == WRAPPED_SOL && output == self.mint;
        let buy_sol = input == self.mint && output == WRAPPED_SOL;
        if faults.no_route || !(sell_sol || buy_sol) {
            return Err(JupError::bad(
                "COULD_NOT_FIND_ANY_ROUTE",
                "Could not find any route",
            ));
        }
        Ok(Trade {
            input,
            output,
            sell_sol,
        })
    }

    fn vault_token_account(&self) -> Pubkey {
        get_associated_token_address_with_program_id(&self.vault, &self.mint, &self.token_program)
    }

    fn pool_token_account(&self) -> Pubkey {
        get_associated_token_address_with_program_id(
            &self.pool.pubkey(),
            &self.mint,
            &self.token_program,
        )
    }

    /// The pool's reserves: lamports it can spend without falling below rent exemption,
    /// and its token balance.
    /// (The vault's count too: what was sold to the pool.)
    async fn reserves(&self) -> Result<(u64, u64), JupError> {
        let lamports = self
            .rpc
            .get_balance(&self.pool.pubkey())
            .await
            .map_err(node_failed)?;
        let vaulted = self
            .rpc
            .get_balance(&self.vault)
            .await
            .map_err(node_failed)?;
        let rent = self
            .rpc
            .get_minimum_balance_for_rent_exemption(0)
            .await
            .map_err(node_failed)?;
        let mut tokens: u64 = 0;
        for account in [self.pool_token_account(), self.vault_token_account()] {
            let held: u64 = self
                .rpc
                .get_token_account_balance(&account)
                .await
                .map_err(node_failed)?
                .amount
                .parse()
                .map_err(node_failed)?;
            tokens = tokens.saturating_add(held);
        }
        Ok((
            lamports.saturating_sub(rent) + vaulted.saturating_sub(rent),
            tokens,
        ))
    }
}

/// The program the pool's vault is derived for (Jupiter's own id: any program would do).
const VAULT_PROGRAM: Pubkey = solana_pubkey::pubkey!("JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4");

/// Makes the vault able to take what is sold: rent-exempt, with a token account of `mint`
/// (under `program`), both paid by `pool`.
async fn open_vault(
    rpc: &RpcClient,
    pool: &Keypair,
    vault: &Pubkey,
    (mint, program): (&Pubkey, &Pubkey),
) -> anyhow::Result<()> {
    let rent = rpc.get_minimum_balance_for_rent_exemption(0).await?;
    let instructions = [
        solana_system_interface::instruction::transfer(&pool.pubkey(), vault, rent),
        create_associated_token_account_idempotent(&pool.pubkey(), vault, mint, program),
    ];
    let blockhash = rpc.get_latest_blockhash().await?;
    let tx = solana_transaction::Transaction::new_signed_with_payer(
        &instructions,
        Some(&pool.pubkey()),
        &[pool],
        blockhash,
    );
    rpc.send_and_confirm_transaction(&tx)
        .await
        .context("opening the pool's vault")?;
    Ok(())
}

/// Constant product with a 0.3% input fee, rounded down.
fn amount_out(amount_in: u64, reserve_in: u64, reserve_out: u64) -> u64 {
    let in_with_fee = u128::from(amount_in) * 997;
    let denominator = u128::from(reserve_in) * 1000 + in_with_fee;
    if denominator == 0 {
        return 0;
    }
    // Below `reserve_out`, so it fits.
    u64::try_from(in_with_fee * u128::from(reserve_out) / denominator).unwrap_or(0)
}

fn param<T: FromStr>(params: &HashMap<String, String>, name: &str) -> Result<T, JupError> {
    params
        .get(name)
        .ok_or_else(|| JupError::bad("INVALID_REQUEST", format!("{name} is required")))?
        .parse()
        .map_err(|_| JupError::bad("INVALID_REQUEST", format!("{name} is invalid")))
}

async fn quote(
    State(venue): State<Shared>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Value>, JupError> {
    let trade = venue.trade(param(&params, "inputMint")?, param(&params, "outputMint")?)?;
    let amount: u64 = param(&params, "amount")?;
    let slippage_bps: u16 = match params.get("slippageBps") {
        Some(_) => param(&params, "slippageBps")?,
        None => 50,
    };
    if params.get("swapMode").is_some_and(|m| m != "ExactIn") {
        return Err(JupError::bad("NOT_SUPPORTED", "only ExactIn is supported"));
    }
    let (sol, tokens) = venue.reserves().await?;
    let (reserve_in, reserve_out) = if trade.sell_sol {
        (sol, tokens)
    } else {
        (tokens, sol)
    };
    let out = amount_out(amount, reserve_in, reserve_out);
    if out == 0 || slippage_bps > 10_000 {
        return Err(JupError::bad(
            "COULD_NOT_FIND_ANY_ROUTE",
            "Could not find any route",
        ));
    }
    let threshold = if venue.faults.lock().zero_threshold {
        0
    } else {
        u128::from(out) * u128::from(10_000 - slippage_bps) / 10_000
    };
    let fee = u128::from(amount) * 3 / 1000;
    let slot = venue.rpc.get_slot().await.map_err(node_failed)?;
    Ok(Json(json!({
        "inputMint": trade.input.to_string(),
        "inAmount": amount.to_string(),
        "outputMint": trade.output.to_string(),
        "outAmount": out.to_string(),
        "otherAmountThreshold": threshold.to_string(),
        "swapMode": "ExactIn",
        "slippageBps": slippage_bps,
        "platformFee": null,
        "priceImpactPct": format!("{:.6}", amount as f64 / (reserve_in as f64 + amount as f64)),
        "routePlan": [{
            "swapInfo": {
                "ammKey": venue.pool.pubkey().to_string(),
                "label": "WalletOps Pool",
                "inputMint": trade.input.to_string(),
                "outputMint": trade.output.to_string(),
                "inAmount": amount.to_string(),
                "outAmount": out.to_string(),
                "feeAmount": fee.to_string(),
                "feeMint": trade.input.to_string(),
            },
            "percent": 100
        }],
        "contextSlot": slot,
        "timeTaken": 0.001
    })))
}

/// A string field of the quote, parsed.
fn quoted<T: FromStr>(quote: &Value, name: &str) -> Result<T, JupError> {
    quote
        .get(name)
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            JupError::bad(
                "INVALID_REQUEST",
                format!("quoteResponse.{name} is invalid"),
            )
        })
}

async fn swap(State(venue): State<Shared>, body: Bytes) -> Result<Json<Value>, JupError> {
    let body: Value = serde_json::from_slice(&body)
        .map_err(|_| JupError::bad("INVALID_REQUEST", "the body is not JSON"))?;
    let user: Pubkey = quoted(&body, "userPublicKey")?;
    let quote = body
        .get("quoteResponse")
        .ok_or_else(|| JupError::bad("INVALID_REQUEST", "quoteResponse is required"))?;
    let trade = venue.trade(quoted(quote, "inputMint")?, quoted(quote, "outputMint")?)?;
    let in_amount: u64 = quoted(quote, "inAmount")?;
    let out_amount: u64 = quoted(quote, "outAmount")?;
    let mut instructions = venue.swap_instructions(&user, &trade, in_amount, out_amount)?;
    let extra = venue.faults.lock().extra;
    if let Some(extra) = extra {
        instructions.push(venue.extra(&user, extra)?);
    }
    let (blockhash, last_valid_block_height) = venue
        .rpc
        .get_latest_blockhash_with_commitment(venue.rpc.commitment())
        .await
        .map_err(node_failed)?;
    let message = v0::Message::try_compile(&user, &instructions, &[], blockhash)
        .map_err(|e| JupError::bad("FAILED_TO_GET_SWAP_AND_ACCOUNT_METAS", e.to_string()))?;
    let message = VersionedMessage::V0(message);
    let signers = usize::from(message.header().num_required_signatures);
    let mut signatures = vec![Signature::default(); signers];
    let pool_index = message
        .static_account_keys()
        .iter()
        .position(|key| *key == venue.pool.pubkey())
        .filter(|index| *index < signers)
        .ok_or_else(|| JupError::internal("the pool is not a signer"))?;
    signatures[pool_index] = venue.pool.sign_message(&message.serialize());
    let transaction = VersionedTransaction {
        signatures,
        message,
    };
    let bytes = wincode::serialize(&transaction).map_err(node_failed)?;
    let priority_fee = u64::from(COMPUTE_UNIT_LIMIT) * COMPUTE_UNIT_PRICE / 1_000_000;
    Ok(Json(json!({
        "swapTransaction": BASE64.encode(bytes),
        "lastValidBlockHeight": last_valid_block_height,
        "prioritizationFeeLamports": priority_fee,
        "computeUnitLimit": COMPUTE_UNIT_LIMIT,
        "prioritizationType": {
            "computeBudget": {
                "microLamports": COMPUTE_UNIT_PRICE,
                "estimatedMicroLamports": COMPUTE_UNIT_PRICE
            }
        },
        "dynamicSlippageReport": null,
        "simulationError": null
    })))
}

impl Venue {
    /// The swap's instructions: the compute budget, then the two legs.
    fn swap_instructions(
        &self,
        user: &Pubkey,
        trade: &Trade,
        in_amount: u64,
        out_amount: u64,
    ) -> Result<Vec<Instruction>, JupError> {
        let pool = self.pool.pubkey();
        let program = &self.token_program;
        let user_tokens = get_associated_token_address_with_program_id(user, &self.mint, program);
        let pool_tokens = self.pool_token_account();
        let token_leg = |from: &Pubkey, to: &Pubkey, authority: &Pubkey, amount: u64| {
            transfer_checked(
                program,
                from,
                &self.mint,
                to,
                authority,
                &[],
                amount,
                self.decimals,
            )
            .map_err(|e| JupError::internal(e.to_string()))
        };
        let mut instructions = vec![
            ComputeBudgetInstruction::set_compute_unit_limit(COMPUTE_UNIT_LIMIT),
            ComputeBudgetInstruction::set_compute_unit_price(COMPUTE_UNIT_PRICE),
        ];
        let (divert, to_key) = {
            let faults = self.faults.lock();
            (faults.divert && trade.sell_sol, faults.input_to_key)
        };
        let (receiver, out_amount) = if divert {
            (faults::STRANGER, 1)
        } else if to_key {
            (faults::key_holder(), out_amount)
        } else {
            (self.vault, out_amount)
        };
        if trade.sell_sol {
            instructions.extend([
                solana_system_interface::instruction::transfer(user, &receiver, in_amount),
                create_associated_token_account_idempotent(user, user, &self.mint, program),
                token_leg(&pool_tokens, &user_tokens, &pool, out_amount)?,
            ]);
        } else {
            let sink = if to_key {
                get_associated_token_address_with_program_id(&receiver, &self.mint, program)
            } else {
                self.vault_token_account()
            };
            if to_key {
                instructions.push(create_associated_token_account_idempotent(
                    user, &receiver, &self.mint, program,
                ));
            }
            instructions.extend([
                token_leg(&user_tokens, &sink, user, in_amount)?,
                solana_system_interface::instruction::transfer(&pool, user, out_amount),
            ]);
        }
        Ok(instructions)
    }
}
