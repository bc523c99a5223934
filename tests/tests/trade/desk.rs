//! The EVM trading desk the service tests share: a funded pool on anvil, its
//! 1inch-compatible aggregator on a loopback port, and the service pointed at both.

use super::tokens;
use alloy::{
    primitives::{Address, U256, utils::parse_ether},
    sol,
    sol_types::SolCall,
};
use serde_json::Value;
use tokio::task::JoinHandle;
use walletops_devnet_aggregator::DevAggregator;
use walletops_tests::{Backend, Rest, Service, anvil::Anvil};

sol! {
    interface Pool {
        function getAmountOut(bool nativeIn, uint256 amountIn) external view returns (uint256);
    }
}

/// The 1inch API key the service is given (the local aggregator takes any).
pub(crate) const API_KEY: &str = "quote-test-key";

/// A pool on anvil, its aggregator, and the service pointed at both.
pub(crate) struct Desk {
    pub(crate) anvil: Anvil,
    pub(crate) token: Address,
    pub(crate) pool: Address,
    pub(crate) aggregator: DevAggregator,
    pub(crate) svc: Service,
    /// The caller's default EVM wallet: 10 ETH and 1,000 tokens.
    pub(crate) wallet: Address,
    /// Where the aggregator listens.
    pub(crate) url: String,
    _server: JoinHandle<std::io::Result<()>>,
}

/// The option that lists the routers a swap may call besides the built-in ones.
pub(crate) const ALLOWED_ROUTERS: &str = "WALLETOPS_TRADE__EVM__ALLOWED_ROUTERS";

impl Desk {
    /// `env` and the aggregator's API key (`None`: not configured) go to the service.
    pub(crate) async fn open(
        b: Backend,
        env: &[(&str, &str)],
        api_key: Option<&str>,
    ) -> anyhow::Result<Self> {
        let anvil = Anvil::start().await?;
        let (token, pool) = super::funded_pool(&anvil).await?;
        let aggregator = DevAggregator::connect(anvil.url(), pool).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(aggregator.clone().serve(listener));
        let mut env = env.to_vec();
        env.push(("WALLETOPS_TRADE__EVM__BASE_URL", url.as_str()));
        // The desk's pool is no built-in router: the operator lists it, unless the test
        // sets the list itself.
        let routers = format!("[\"{pool}\"]");
        if !env.iter().any(|(k, _)| *k == ALLOWED_ROUTERS) {
            env.push((ALLOWED_ROUTERS, routers.as_str()));
        }
        if let Some(key) = api_key {
            env.push(("WALLETOPS_TRADE__EVM__API_KEY", key));
        }
        let svc = Service::start_with(b, anvil.service_options("", &env)).await?;
        let wallet = anvil
            .fund_default_wallet(&svc.rest(&svc.api_key), parse_ether("10")?)
            .await?;
        anvil.mint(token, wallet, tokens(1_000)).await?;
        Ok(Self {
            anvil,
            token,
            pool,
            aggregator,
            svc,
            wallet,
            url,
            _server: server,
        })
    }

    pub(crate) fn api(&self) -> Rest {
        self.svc.rest(&self.svc.api_key)
    }

    pub(crate) async fn quote(&self, body: Value) -> anyhow::Result<walletops_tests::Reply> {
        self.api().post("/trade/quote", &body).await
    }

    /// What the pool pays for `amount_in`, read from the contract.
    pub(crate) async fn pool_out(&self, native_in: bool, amount_in: U256) -> anyhow::Result<U256> {
        use alloy::providers::Provider;
        let call = Pool::getAmountOutCall {
            nativeIn: native_in,
            amountIn: amount_in,
        };
        let tx = alloy::rpc::types::TransactionRequest::default()
            .to(self.pool)
            .input(call.abi_encode().into());
        let answer = self.anvil.provider().call(tx).await?;
        Ok(Pool::getAmountOutCall::abi_decode_returns(&answer)?)
    }
}
