//! `Core`: the parts of the service wired together once at startup and shared by every RPC.

use std::{ops::Deref, str::FromStr, sync::Arc};

use anyhow::Context;

use tonic::metadata::MetadataMap;
use uuid::Uuid;
use walletops_proto::{API_KEY_HEADER, IDEMPOTENCY_KEY_HEADER, UNREADABLE_HEADER};

use crate::{
    auth::{ApiKeys, Caller},
    balances::Balances,
    chains::Registry,
    chains::{evm::EvmClients, solana::SolanaClients},
    config::Config,
    error::{Result, WalletOpsError},
    idempotency::Idempotency,
    monitor::Monitor,
    ratelimit::{Budget, RateLimiter},
    signer::Keystore,
    signer::{LocalSigner, Signer},
    store::Store,
    transactions::Transactions,
    transfers::{BroadcastLog, Writes, evm::EvmPipeline, solana::SolanaPipeline},
    wallets::Wallets,
};

/// The service's shared state. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Core(Arc<Parts>);

/// The parts of the core.
#[derive(Debug)]
pub struct Parts {
    /// Configuration as loaded.
    pub config: Config,
    /// The database.
    pub store: Store,
    /// API keys.
    pub keys: ApiKeys,
    /// Per-user budgets.
    pub limiter: RateLimiter,
    /// Wallets.
    pub wallets: Wallets,
    /// Transaction records.
    pub transactions: Transactions,
    /// Known chains.
    pub chains: Arc<Registry>,
    /// Idempotent writes.
    pub writes: Writes,
    /// The EVM write pipeline.
    pub evm: EvmPipeline,
    /// The Solana write pipeline.
    pub solana: SolanaPipeline,
    /// Balance reads.
    pub balances: Balances,
    /// Idempotency keys.
    pub idempotency: Idempotency,
    /// Wallet keys' signer.
    pub signer: Arc<dyn Signer>,
    /// The broadcast times the write pipelines note, written behind.
    pub broadcasts: BroadcastLog,
}

impl Deref for Core {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// A validated `idempotency-key`: a UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyKey(Uuid);

impl IdempotencyKey {
    /// The key.
    pub fn uuid(self) -> Uuid {
        self.0
    }
}

impl Core {
    /// Opens the store (running migrations), the keystore and the registry.
    pub async fn open(config: Config) -> anyhow::Result<Self> {
        let store = Store::connect(&config.database_url()).await?;
        let sample = store.any_sealed_key().await?;
        let keystore = Arc::new(Keystore::open(
            config.master_key.as_ref().map(|s| s.expose()),
            &config.data_dir,
            sample.as_ref().map(|(f, a, k)| (*f, a.as_str(), k)),
        )?);
        let chains = Arc::new(Registry::new(&config.chains)?);
        let signer: Arc<dyn Signer> = Arc::new(LocalSigner::new(keystore.clone(), store.clone()));
        let evm_clients = Arc::new(EvmClients::default());
        let solana_clients = Arc::new(SolanaClients::default());
        let idempotency = Idempotency::new(
            store.clone(),
            std::time::Duration::from_secs(config.idempotency_retention_secs),
        );
        let limiter = match &config.redis_url {
            Some(url) => RateLimiter::redis(config.rate_limits.clone(), url.expose())
                .await
                .context("connecting to Redis (redis_url) for the rate limits")?,
            None => RateLimiter::new(config.rate_limits.clone()),
        };
        let broadcasts = BroadcastLog::start(store.clone(), config.request_timeout());
        Ok(Self(Arc::new(Parts {
            keys: ApiKeys::new(store.clone()),
            limiter,
            wallets: Wallets::new(store.clone(), keystore),
            transactions: Transactions::new(store.clone()),
            writes: Writes::new(store.clone(), idempotency.clone()),
            evm: EvmPipeline::new(
                store.clone(),
                signer.clone(),
                evm_clients.clone(),
                broadcasts.clone(),
                config.monitor.max_fee_per_gas_wei(),
            ),
            balances: Balances::new(evm_clients, solana_clients.clone()),
            solana: SolanaPipeline::new(
                store.clone(),
                signer.clone(),
                solana_clients,
                broadcasts.clone(),
            ),
            broadcasts,
            idempotency,
            signer,
            chains,
            store,
            config,
        })))
    }

    /// Forgets what the store knew of dev chain `slug` from an earlier run, the chain having
    /// started empty: see `Store::forget_chain_state`. Returns how many open records ended.
    pub async fn forget_dev_chain(&self, slug: &str) -> anyhow::Result<u64> {
        let chain = self.chains.resolve(slug)?;
        Ok(self
            .store
            .forget_chain_state(
                slug,
                chain.chain_id(),
                "the dev chain it was sent to was restarted empty",
            )
            .await?)
    }

    /// The transaction monitor of this core.
    pub fn monitor(&self) -> Monitor {
        Monitor::new(
            self.store.clone(),
            self.chains.clone(),
            self.wallets.clone(),
            self.evm.clone(),
            self.solana.clone(),
            self.idempotency.clone(),
            self.config.monitor.clone(),
        )
    }

    /// Authenticates the request's `x-api-key` and draws it from the caller's `budget`.
    /// Every RPC calls this before it reads anything else.
    pub async fn admit(&self, metadata: &MetadataMap, budget: Budget) -> Result<Caller> {
        let presented = match metadata.get(API_KEY_HEADER) {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| WalletOpsError::Unauthorized("x-api-key is not ASCII"))?,
            ),
        };
        let caller = self.keys.authenticate(presented).await?;
        tracing::Span::current().record("key", caller.key_prefix.as_str());
        self.limiter.admit(caller.user_id, budget).await?;
        if let Some(why) = metadata.get_bin(UNREADABLE_HEADER) {
            return Err(unreadable(why.to_bytes().ok().as_deref()));
        }
        Ok(caller)
    }

    /// The request's `idempotency-key`, which every write requires as a UUID.
    pub fn idempotency_key(&self, metadata: &MetadataMap) -> Result<IdempotencyKey> {
        const FIELD: &str = "Idempotency-Key";
        let raw = metadata
            .get(IDEMPOTENCY_KEY_HEADER)
            .ok_or_else(|| WalletOpsError::invalid(FIELD, "required on writes: send a UUID"))?;
        raw.to_str()
            .ok()
            .and_then(|s| Uuid::from_str(s.trim()).ok())
            .map(IdempotencyKey)
            .ok_or_else(|| WalletOpsError::invalid(FIELD, "must be a UUID"))
    }
}

/// The INVALID_INPUT of a request the REST edge could not read, from what it said of it
/// (`UNREADABLE_HEADER`).
fn unreadable(why: Option<&[u8]>) -> WalletOpsError {
    #[derive(serde::Deserialize)]
    struct Why {
        field: String,
        problem: String,
    }
    match why.and_then(|b| serde_json::from_slice::<Why>(b).ok()) {
        Some(Why { field, problem }) => WalletOpsError::invalid(&field, problem),
        None => WalletOpsError::invalid("body", "unreadable"),
    }
}
