//! The Jupiter fake over a pool on the Solana test node.

use solana_keypair::Keypair;
use solana_message::VersionedMessage;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signature::Signature;
use solana_signer::Signer as _;
use solana_transaction::versioned::VersionedTransaction;
use walletops_chains::trade::{
    Slippage, SolanaAggregator, SolanaQuoteRequest, SolanaSwap, TradeError, WRAPPED_SOL_MINT,
    jupiter::Jupiter,
};
use walletops_core::{WalletOpsError, config::Secret};
use walletops_tests::{
    fakes::jupiter::{COMPUTE_UNIT_LIMIT, JupiterFake},
    solana_node::{SolanaNode, token_balance},
};

const SOL: u64 = 1_000_000_000;
/// The pool's token: 6 decimals, 1,000,000 of them in the pool.
const POOL_TOKENS: u64 = 1_000_000_000_000;

/// A node, a pool of SOL and a token behind the fake, a client of it, and a wallet with
/// 10 SOL and no token.
struct Market {
    _node: SolanaNode,
    rpc: RpcClient,
    fake: JupiterFake,
    client: Jupiter,
    mint: Pubkey,
    wallet: Keypair,
}

impl Market {
    async fn open() -> anyhow::Result<Self> {
        let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
        let rpc = RpcClient::new(node.url());
        let (fake, mint) = JupiterFake::with_new_pool(&node, 100 * SOL, POOL_TOKENS, 6).await?;
        let wallet = Keypair::new();
        node.airdrop(&wallet.pubkey(), 10 * SOL)?;
        let client = Jupiter::new(
            fake.url().parse()?,
            Secret::default(),
            995_000,
            super::policy(),
        )?;
        Ok(Self {
            _node: node,
            rpc,
            fake,
            client,
            mint,
            wallet,
        })
    }

    fn request(&self, input_mint: Pubkey, output_mint: Pubkey, amount: u64) -> SolanaQuoteRequest {
        SolanaQuoteRequest {
            input_mint,
            output_mint,
            amount,
            slippage: Slippage::from_bps(50).expect("bps"),
            dexes: vec![],
            exclude_dexes: vec![],
        }
    }

    /// Signs the swap as the wallet, the one signature missing, and sends it; returns the
    /// fee it paid.
    async fn sign_and_send(&self, swap: SolanaSwap) -> anyhow::Result<u64> {
        let mut tx: VersionedTransaction = swap.transaction;
        let keys = tx.message.static_account_keys();
        assert_eq!(keys[0], self.wallet.pubkey(), "the wallet pays the fee");
        assert!(keys.contains(&self.fake.pool()));
        assert_eq!(
            tx.signatures[0],
            Signature::default(),
            "the wallet's slot is empty"
        );
        assert_eq!(
            tx.verify_with_results(),
            [false, true],
            "only the pool has signed"
        );
        let VersionedMessage::V0(message) = &tx.message else {
            anyhow::bail!("Jupiter builds v0 transactions");
        };
        let fee = self.rpc.get_fee_for_message(message).await?;
        tx.signatures[0] = self.wallet.sign_message(&tx.message.serialize());
        self.rpc.send_and_confirm_transaction(&tx).await?;
        Ok(fee)
    }

    async fn balances(&self, owner: &Pubkey) -> anyhow::Result<(u64, u64)> {
        Ok((
            self.rpc.get_balance(owner).await?,
            token_balance(&self.rpc, owner, &self.mint).await?,
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_swap_moves_the_quoted_amounts_both_ways() -> anyhow::Result<()> {
    let m = Market::open().await?;
    let (wallet, pool) = (m.wallet.pubkey(), m.fake.pool());

    // SOL for the token.
    let quote = m
        .client
        .quote(&m.request(WRAPPED_SOL_MINT, m.mint, SOL))
        .await?;
    assert!(quote.out_amount > 0 && quote.other_amount_threshold < quote.out_amount);
    assert_eq!(
        quote.raw["routePlan"][0]["swapInfo"]["inAmount"],
        SOL.to_string()
    );
    let swap = m.client.build_swap(&quote, &wallet).await?;
    assert_eq!(swap.compute_unit_limit, COMPUTE_UNIT_LIMIT);
    let (wallet_sol, _) = m.balances(&wallet).await?;
    let (pool_sol, pool_tokens) = m.balances(&pool).await?;
    let vault_sol = m.rpc.get_balance(&m.fake.vault()).await?;
    let fee = m.sign_and_send(swap).await?;
    let account_rent = m.rpc.get_minimum_balance_for_rent_exemption(165).await?;
    let (wallet_sol_after, wallet_tokens) = m.balances(&wallet).await?;
    let (pool_sol_after, pool_tokens_after) = m.balances(&pool).await?;
    assert_eq!(wallet_tokens, quote.out_amount);
    assert_eq!(pool_tokens - pool_tokens_after, quote.out_amount);
    assert_eq!(pool_sol_after, pool_sol, "the SOL went to the vault");
    assert_eq!(m.rpc.get_balance(&m.fake.vault()).await? - vault_sol, SOL);
    // The wallet paid the SOL, the fee and its new token account's rent.
    assert_eq!(wallet_sol - wallet_sol_after, SOL + fee + account_rent);

    // Half of the token back for SOL.
    let sell = wallet_tokens / 2;
    let quote = m
        .client
        .quote(&m.request(m.mint, WRAPPED_SOL_MINT, sell))
        .await?;
    let swap = m.client.build_swap(&quote, &wallet).await?;
    let fee = m.sign_and_send(swap).await?;
    let (wallet_sol_final, wallet_tokens_final) = m.balances(&wallet).await?;
    let (pool_sol_final, _) = m.balances(&pool).await?;
    assert_eq!(wallet_tokens - wallet_tokens_final, sell);
    assert_eq!(wallet_sol_final + fee - wallet_sol_after, quote.out_amount);
    assert_eq!(pool_sol_after - pool_sol_final, quote.out_amount);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_refuses_as_jupiter_does_and_shows_faults() -> anyhow::Result<()> {
    let m = Market::open().await?;
    let faults = m.fake.faults();
    let request = m.request(WRAPPED_SOL_MINT, m.mint, SOL);

    faults.not_tradable(m.mint);
    let err = m.client.quote(&request).await.expect_err("not tradable");
    let TradeError::Rejected {
        status: 400,
        code,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(code.as_deref(), Some("TOKEN_NOT_TRADABLE"));
    assert_eq!(message, &format!("The token {} is not tradable", m.mint));
    let WalletOpsError::QuoteFailed(text) = WalletOpsError::from(err) else {
        panic!()
    };
    assert!(text.contains("is not tradable"), "{text}");
    faults.clear();

    faults.no_route(true);
    let err = m.client.quote(&request).await.expect_err("no route");
    assert!(
        matches!(&err, TradeError::Rejected { code: Some(c), .. } if c == "COULD_NOT_FIND_ANY_ROUTE"),
        "{err:?}"
    );
    faults.clear();
    let err = m
        .client
        .quote(&m.request(m.mint, m.mint, 1))
        .await
        .expect_err("equal mints");
    assert!(
        matches!(&err, TradeError::Rejected { code: Some(c), .. } if c == "CIRCULAR_ARBITRAGE_IS_DISABLED"),
        "{err:?}"
    );

    let before = faults.requests();
    faults.fail_next(1);
    let quote = m.client.quote(&request).await?;
    assert_eq!(
        faults.requests() - before,
        2,
        "a quote is retried after a 500"
    );
    let before = faults.requests();
    faults.fail_next(1);
    let err = m
        .client
        .build_swap(&quote, &m.wallet.pubkey())
        .await
        .expect_err("500");
    assert!(matches!(err, TradeError::Failed { .. }), "{err:?}");
    assert_eq!(faults.requests() - before, 1, "a swap build is not retried");

    faults.stall_next(1);
    let err = m
        .client
        .build_swap(&quote, &m.wallet.pubkey())
        .await
        .expect_err("stall");
    assert!(
        matches!(&err, TradeError::Failed { message } if message.contains("did not answer")),
        "{err:?}"
    );
    Ok(())
}
