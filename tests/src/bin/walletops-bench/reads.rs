//! The balance reads: 1 and `TOKENS` tokens through the REST edge, the gRPC core and the
//! node alone, each timed in turn.

use std::time::{Duration, Instant};

use alloy::{
    primitives::{Address, U256},
    providers::{Provider, bindings::IMulticall3},
    rpc::types::TransactionRequest,
    sol_types::SolCall,
};
use anyhow::ensure;
use tonic::transport::Channel;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{Rest, anvil::Anvil, with_key};

use crate::report::{Latency, ms};

alloy::sol! {
    interface IERC20 {
        function balanceOf(address owner) external view returns (uint256);
    }
}

/// Tokens in the large balance read: the most one request may name.
pub(crate) const TOKENS: usize = 50;

/// Untimed requests of each balance read before measuring, so that connections, chain
/// clients and token metadata are set up in both cases alike.
const WARMUP_READS: u64 = 5;

/// Balance reads: median and p95 of `GET /wallets/balances?fresh=true` naming 1 token and
/// naming `TOKENS` tokens, and of the node's own Multicall3 call for each.
pub(crate) async fn balance_reads(
    anvil: &Anvil,
    api: &Rest,
    (core, key): &(WalletOpsServiceClient<Channel>, String),
    wallet: Address,
    reads: u64,
) -> anyhow::Result<((Latency, Latency), (Latency, Latency))> {
    let mut tokens = Vec::with_capacity(TOKENS);
    for i in 0..TOKENS {
        let token = anvil.deploy_token(&format!("T{i:02}"), 18).await?;
        anvil
            .mint(token, wallet, U256::from(1000 + i as u64))
            .await?;
        tokens.push(token.to_string());
    }
    // Native plus every token: all are non-zero, so each must be listed.
    let mut rest = |n: usize| {
        let path = format!(
            "/wallets/balances?chain=anvil&tokens={}&fresh=true",
            tokens[..n].join(",")
        );
        let api = api.clone();
        async move {
            let start = Instant::now();
            let reply = api.get(&path).await?;
            let took = start.elapsed();
            ensure!(reply.status == 200, "GET {path}: {}", reply.text);
            let listed = reply.body["balances"].as_array().map_or(0, Vec::len);
            ensure!(listed == n + 1, "expected {} balances, got {listed}", n + 1);
            Ok::<_, anyhow::Error>(took)
        }
    };
    one_against_all(WARMUP_READS, &mut rest).await?;
    let through_rest = one_against_all(reads, &mut rest).await?;
    // The edge's share: the same reads asked of the gRPC core directly.
    let grpc = |n: usize| {
        let req = pb::GetBalancesRequest {
            chain: "anvil".to_owned(),
            address: None,
            tokens: tokens[..n].to_vec(),
            include_zero: None,
            fresh: Some(true),
        };
        let (mut core, key) = (core.clone(), key.clone());
        async move {
            let start = Instant::now();
            let reply = core.get_balances(with_key(req, &key)?).await?.into_inner();
            let took = start.elapsed();
            ensure!(
                reply.balances.len() == n + 1,
                "expected {} balances, got {}",
                n + 1,
                reply.balances.len()
            );
            Ok::<_, anyhow::Error>(took)
        }
    };
    print_medians("gRPC core", &one_against_all(reads, grpc).await?);
    // The node's share: the same Multicall3 reads asked of anvil directly.
    let token_addrs: Vec<Address> = tokens.iter().map(|t| t.parse()).collect::<Result<_, _>>()?;
    let node = |n: usize| {
        let mut calls = vec![IMulticall3::Call3 {
            target: alloy::providers::MULTICALL3_ADDRESS,
            allowFailure: false,
            callData: IMulticall3::getEthBalanceCall { addr: wallet }
                .abi_encode()
                .into(),
        }];
        calls.extend(token_addrs[..n].iter().map(|t| IMulticall3::Call3 {
            target: *t,
            allowFailure: true,
            callData: IERC20::balanceOfCall { owner: wallet }.abi_encode().into(),
        }));
        let req = TransactionRequest::default()
            .to(alloy::providers::MULTICALL3_ADDRESS)
            .input(IMulticall3::aggregate3Call { calls }.abi_encode().into());
        async move {
            let start = Instant::now();
            anvil.provider().call(req).await?;
            Ok::<_, anyhow::Error>(start.elapsed())
        }
    };
    let node_alone = one_against_all(reads, node).await?;
    print_medians("node alone", &node_alone);
    Ok((through_rest, node_alone))
}

/// `reads` timings each of `time(1)` and `time(TOKENS)`, taken in turn so that any drift of
/// the machine or the node hits both cases alike.
async fn one_against_all<Fut>(
    reads: u64,
    mut time: impl FnMut(usize) -> Fut,
) -> anyhow::Result<(Latency, Latency)>
where
    Fut: Future<Output = anyhow::Result<Duration>>,
{
    let (mut one, mut all) = (Vec::new(), Vec::new());
    for _ in 0..reads {
        one.push(time(1).await?);
        all.push(time(TOKENS).await?);
    }
    Ok((Latency::of(one), Latency::of(all)))
}

/// Prints the medians of a 1-token and a `TOKENS`-token read asked of `what`.
fn print_medians(what: &str, (one, all): &(Latency, Latency)) {
    println!(
        "  {what}: 1 token median {:.2} ms, {TOKENS} tokens median {:.2} ms",
        ms(one.median),
        ms(all.median)
    );
}
