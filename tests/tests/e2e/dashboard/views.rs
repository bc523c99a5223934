//! The dashboard's views over gRPC: `ListHoldings` (each wallet's native balance on every
//! chain of its family, a chain that cannot be read named, not fatal) and
//! `ListTransactions` (newest first, paged, filtered).

use serde_json::json;
use walletops_proto::v1::{self as pb, dashboard_service_client::DashboardServiceClient};
use walletops_tests::{Backend, on_both_backends, reason, with_key};

use super::funded;

async fn holdings_and_pages_of_transactions(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc, wallet) = funded(b).await?;
    let api = svc.rest(&svc.api_key);
    let mut d = DashboardServiceClient::new(svc.channel().await?);
    let holdings = d
        .list_holdings(with_key(
            pb::ListHoldingsRequest {
                fresh: true,
                all_chains: true,
            },
            &svc.api_key,
        )?)
        .await?
        .into_inner()
        .holdings;
    assert_eq!(holdings.len(), 2, "one EVM and one Solana wallet");
    let evm = holdings
        .iter()
        .find(|h| {
            h.wallet
                .as_ref()
                .is_some_and(|w| w.address.eq_ignore_ascii_case(&wallet.to_string()))
        })
        .expect("the EVM wallet");
    let on_anvil = evm
        .chains
        .iter()
        .find(|c| c.chain == "anvil")
        .expect("chain anvil");
    assert_eq!(
        on_anvil.native.as_ref().map(|b| b.raw.as_str()),
        Some("10000000000000000000")
    );
    // Every EVM chain of the registry is listed; one that cannot be read says why.
    assert!(evm.chains.len() > 1);
    assert!(
        evm.chains
            .iter()
            .all(|c| c.native.is_some() || c.error.is_some())
    );
    // Three sends, then pages of two, newest first.
    let mut ids = Vec::new();
    for amount in ["1", "2", "3"] {
        let reply = api
            .post("/send", &json!({"chain": "anvil", "from": wallet.to_string(), "to": "0x1111111111111111111111111111111111111111", "asset": "native", "amount": amount}))
            .await?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        ids.push(reply.body["id"].as_str().unwrap_or_default().to_owned());
    }
    let page = |token: String, status: Option<pb::TransactionStatus>| pb::ListTransactionsRequest {
        page_size: 2,
        page_token: token,
        status: status.map(i32::from),
        chain: Some("anvil".to_owned()),
    };
    let first = d
        .list_transactions(with_key(page(String::new(), None), &svc.api_key)?)
        .await?
        .into_inner();
    let got: Vec<&str> = first.transactions.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(got, [ids[2].as_str(), ids[1].as_str()]);
    assert!(!first.next_page_token.is_empty());
    let second = d
        .list_transactions(with_key(page(first.next_page_token, None), &svc.api_key)?)
        .await?
        .into_inner();
    let got: Vec<&str> = second.transactions.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(got, [ids[0].as_str()]);
    assert!(second.next_page_token.is_empty(), "the last page");
    // Filters: a status none has yet, and a bad page size named.
    let reverted = d
        .list_transactions(with_key(
            page(String::new(), Some(pb::TransactionStatus::Reverted)),
            &svc.api_key,
        )?)
        .await?
        .into_inner();
    assert!(reverted.transactions.is_empty());
    let err = d
        .list_transactions(with_key(
            pb::ListTransactionsRequest {
                page_size: 1000,
                chain: Some("dogechain".to_owned()),
                ..Default::default()
            },
            &svc.api_key,
        )?)
        .await
        .expect_err("bad filters");
    assert_eq!(reason(&err).as_deref(), Some("INVALID_INPUT"));
    assert!(
        err.message().contains("page_size") && err.message().contains("chain"),
        "{}",
        err.message()
    );
    // Another user sees none of them.
    let other = svc.create_user("bob").await?;
    let theirs = d
        .list_transactions(with_key(pb::ListTransactionsRequest::default(), &other)?)
        .await?
        .into_inner();
    assert!(theirs.transactions.is_empty());
    Ok(())
}

on_both_backends!(holdings_and_pages_of_transactions);
