//! A local swap aggregator that speaks 1inch's Classic Swap API v6.0 over one SwapPool
//! contract (`tests/contracts/SwapPool.sol`: the native coin against one ERC20, x*y=k with
//! a 0.3% fee) on a local EVM node. The dev playground runs it in-process so quotes and swaps
//! work with no internet; the tests run it as a local HTTP server for the service's 1inch
//! client to call.
//!
//! Served under `/swap/v6.0/{chainId}` (the node's chain id): `GET /quote`, `/swap`,
//! `/approve/spender`, `/approve/allowance` and `/approve/transaction`, with the reference's
//! query names and answer fields, amounts as decimal strings, the native coin as
//! `0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE`, and failures in 1inch's error body
//! (`{error, description, statusCode, requestId, meta}`). Every call needs an
//! `Authorization: Bearer` header; any key is taken.
//!
//! Prices are read from the pool's reserves on the node at each call and computed with the
//! contract's own formula, so `dstAmount` is exactly what the swap pays if nothing trades in
//! between. A swap's `tx` calls the pool itself with 1inch v6's `swap(executor, desc, data)`,
//! the pool being its own executor and `srcReceiver`; it is also the spender to approve.
//!
//! **Invariant:** the aggregator holds no key and sends no transaction; it only reads the
//! node. (`deploy_pool` and `add_liquidity` are setup helpers that send from the node's own
//! unlocked accounts.)

mod pool;
mod routes;

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, PoisonError},
};

use alloy::{
    primitives::Address,
    providers::{Provider, RootProvider},
};
use anyhow::Context as _;
use axum::Router;
use tokio::net::TcpListener;

pub use pool::{add_liquidity, amount_out, deploy_pool, min_out};

/// The address 1inch uses for the native coin.
pub const NATIVE: Address = alloy::primitives::address!("EeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE");

/// A 1inch-compatible aggregator over one pool.
#[derive(Debug, Clone)]
pub struct DevAggregator {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    node: RootProvider,
    chain_id: u64,
    pool: Address,
    token: Address,
    faults: Faults,
}

impl DevAggregator {
    /// An aggregator over `pool` on the node at `node_url`: reads the node's chain id and
    /// the pool's token.
    pub async fn connect(node_url: &str, pool: Address) -> anyhow::Result<Self> {
        let node = RootProvider::new_http(node_url.parse().context("node URL")?);
        let chain_id = node.get_chain_id().await.context("reading the chain id")?;
        let token = pool::view(&node, pool, pool::SwapPool::tokenCall {})
            .await
            .context("reading the pool's token")?;
        Ok(Self {
            state: Arc::new(State {
                node,
                chain_id,
                pool,
                token,
                faults: Faults::default(),
            }),
        })
    }

    /// The switches for the failures it can be told to show.
    pub fn faults(&self) -> Faults {
        self.state.faults.clone()
    }

    /// The chain id it serves under.
    pub fn chain_id(&self) -> u64 {
        self.state.chain_id
    }

    /// The pool: the router a swap calls and the spender to approve.
    pub fn pool(&self) -> Address {
        self.state.pool
    }

    /// The pool's token.
    pub fn token(&self) -> Address {
        self.state.token
    }

    /// The API as a router, to serve or to nest in another.
    pub fn router(&self) -> Router {
        routes::router(self.state.clone())
    }

    /// Serves the API on `listener` until the task is dropped or the listener fails.
    pub async fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        axum::serve(listener, self.router()).await
    }
}

/// Serves a 1inch-compatible API over `pool` on the node at `node_url`, on `listener`.
pub async fn serve(listener: TcpListener, node_url: &str, pool: Address) -> anyhow::Result<()> {
    DevAggregator::connect(node_url, pool)
        .await?
        .serve(listener)
        .await?;
    Ok(())
}

/// Failures the aggregator shows on request, for tests of its callers. Shared: every clone
/// switches the same aggregator.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<FaultState>>);

#[derive(Debug, Default)]
struct FaultState {
    fail: u32,
    stall: u32,
    refused: HashSet<Address>,
    requests: u64,
    /// Swaps built to call this address instead of the pool.
    route_to: Option<Address>,
    /// Wei added to the value of every swap built.
    extra_value: alloy::primitives::U256,
    /// Call data every swap is built with instead of the pool's.
    data: Option<alloy::primitives::Bytes>,
    /// The `srcReceiver` swaps are built with instead of the pool.
    src_receiver: Option<Address>,
    /// The `dstAmount` quotes and swaps answer instead of the pool's price.
    dst_amount: Option<alloy::primitives::U256>,
}

/// What one request meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// HTTP 500 with 1inch's error body.
    Fail,
    /// No answer for a minute (callers time out first).
    Stall,
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next `count` requests are answered with HTTP 500.
    pub fn fail_next(&self, count: u32) {
        self.lock().fail = count;
    }

    /// The next `count` requests get no answer for a minute.
    pub fn stall_next(&self, count: u32) {
        self.lock().stall = count;
    }

    /// Quotes and swaps with `token` on either side are refused as 1inch refuses a token it
    /// does not support: HTTP 400, `not valid token`.
    pub fn refuse_token(&self, token: Address) {
        self.lock().refused.insert(token);
    }

    /// Swaps are built to call `router` instead of the pool (which stays the spender the
    /// aggregator names): what a compromised or confused aggregator would send.
    pub fn route_swaps_to(&self, router: Address) {
        self.lock().route_to = Some(router);
    }

    /// Swaps are built to send `wei` more than they should.
    pub fn overpay_swaps(&self, wei: alloy::primitives::U256) {
        self.lock().extra_value = wei;
    }

    /// Swaps are built with `data` as their call data.
    pub fn replace_swap_data(&self, data: alloy::primitives::Bytes) {
        self.lock().data = Some(data);
    }

    /// Swaps are built to send their input to `receiver` (1inch's `srcReceiver`) instead
    /// of the pool: the input leaves and nothing is bought.
    pub fn send_input_to(&self, receiver: Address) {
        self.lock().src_receiver = Some(receiver);
    }

    /// Quotes and swaps answer `dst_amount` as their `dstAmount`, and swaps are built with
    /// it less the slippage as their minimum.
    pub fn answer_dst_amount(&self, dst_amount: alloy::primitives::U256) {
        self.lock().dst_amount = Some(dst_amount);
    }

    /// Clears every switch.
    pub fn clear(&self) {
        let mut state = self.lock();
        state.fail = 0;
        state.stall = 0;
        state.refused.clear();
        state.route_to = None;
        state.extra_value = alloy::primitives::U256::ZERO;
        state.data = None;
        state.src_receiver = None;
        state.dst_amount = None;
    }

    /// The `srcReceiver` swaps are built with: the pool unless told.
    fn src_receiver(&self, pool: Address) -> Address {
        self.lock().src_receiver.unwrap_or(pool)
    }

    /// The `dstAmount` answered for a trade the pool prices at `priced`.
    fn dst_amount(&self, priced: alloy::primitives::U256) -> alloy::primitives::U256 {
        self.lock().dst_amount.unwrap_or(priced)
    }

    /// Where swaps are built to go, the value they add and the call data they carry instead:
    /// the pool, nothing and their own unless told.
    fn tamper(
        &self,
        pool: Address,
    ) -> (
        Address,
        alloy::primitives::U256,
        Option<alloy::primitives::Bytes>,
    ) {
        let state = self.lock();
        (
            state.route_to.unwrap_or(pool),
            state.extra_value,
            state.data.clone(),
        )
    }

    /// How many requests arrived so far, faulted ones included.
    pub fn requests(&self) -> u64 {
        self.lock().requests
    }

    /// Counts a request and takes the fault it meets, if any (stalls first).
    fn take(&self) -> Option<Fault> {
        let mut state = self.lock();
        state.requests += 1;
        if state.stall > 0 {
            state.stall -= 1;
            Some(Fault::Stall)
        } else if state.fail > 0 {
            state.fail -= 1;
            Some(Fault::Fail)
        } else {
            None
        }
    }

    fn is_refused(&self, token: &Address) -> bool {
        self.lock().refused.contains(token)
    }
}
