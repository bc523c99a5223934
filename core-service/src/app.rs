//! `Core`: the parts of the service wired together once at startup and shared by every RPC,
//! and the step every RPC begins with (`admit_call`, which the admission layer asks; writes
//! go on in `writes`).

use std::{ops::Deref, sync::Arc};

use anyhow::Context;

use tonic::metadata::MetadataMap;
use walletops_proto::{
    API_KEY_HEADER, CLIENT_ADDRESS_HEADER, CSRF_TOKEN_HEADER, SESSION_TOKEN_HEADER,
    UNREADABLE_HEADER,
};

use crate::{
    approvals::Approvals,
    auth::{ApiKeys, Caller, Credential, Gate, Operation, Sessions},
    balances::{Balances, Units},
    config::Config,
    error::{Result, WalletOpsError},
    idempotency::Idempotency,
    limits::Limits,
    policy::Policy,
    quotes::Quotes,
    ratelimit::{Budget, RateLimiter},
    recovery::{evm::EvmRecovery, solana::SolanaRecovery},
    signer::{Hsm, HsmSigner, Keystore, LocalSigner, RoutedSigner, Signer},
    swaps::Swaps,
    transactions::Transactions,
    transfers::{BroadcastLog, Transfers, evm::EvmPipeline, solana::SolanaPipeline},
    wallets::Wallets,
    webhooks::Webhooks,
};

use walletops_chains::{
    Registry,
    evm::EvmClients,
    provider::Privy,
    solana::SolanaClients,
    trade::{Aggregators, HttpPolicy},
};
use walletops_domain::{DashboardSession, Scope, Scopes};
use walletops_store::Store;

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
    /// Keys' spend limits, as their owner sets them.
    pub limits: Limits,
    /// Dashboard sessions.
    pub sessions: Sessions,
    /// Per-user budgets.
    pub limiter: Arc<RateLimiter>,
    /// Wallets.
    pub wallets: Wallets,
    /// Transaction records.
    pub transactions: Transactions,
    /// Known chains.
    pub chains: Arc<Registry>,
    /// The write pipelines.
    pub transfers: Transfers,
    /// What is done to stored EVM records after their first broadcast.
    pub evm_recovery: EvmRecovery,
    /// What is done to stored Solana records after their first send.
    pub solana_recovery: SolanaRecovery,
    /// EVM node clients, one per RPC URL.
    pub evm_clients: Arc<EvmClients>,
    /// Solana node clients, one per RPC URL.
    pub solana_clients: Arc<SolanaClients>,
    /// Trade quotes.
    pub quotes: Quotes,
    /// Swaps.
    pub swaps: Swaps,
    /// Balance reads.
    pub balances: Balances,
    /// Idempotency keys.
    pub idempotency: Idempotency,
    /// Wallet keys' signer.
    pub signer: Arc<dyn Signer>,
    /// The broadcast times the write pipelines note, written behind.
    pub broadcasts: BroadcastLog,
    /// Webhook endpoints.
    pub webhooks: Webhooks,
    /// Deposits to the users' wallets.
    pub deposits: crate::deposits::Deposits,
    /// Wakes the payouts runner when a payout is stored.
    pub payouts_wake: tokio::sync::Notify,
    /// Writes held for approval.
    pub approvals: Approvals,
    /// Judges writes' effects against their keys' limits.
    pub policy: Policy,
    /// Wallets' guards (EIP-7702 delegations to the guard contract).
    pub guards: crate::guard::Guards,
    /// The event streams open on this core.
    pub streams: Arc<crate::streams::Streams>,
}

impl Deref for Core {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
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
            sample.as_ref().map(|(a, k)| (a, k)),
        )?);
        let chains = Arc::new(Registry::new(&config.chains)?);
        let provider = Privy::from_config(&config.provider, HttpPolicy::default())
            .context("the wallet provider")?
            .map(Arc::new);
        let hsm = match &config.hsm {
            Some(hsm) => Some(Arc::new(Hsm::open(hsm).context("the HSM ([hsm])")?)),
            None => None,
        };
        let signer: Arc<dyn Signer> = Arc::new(RoutedSigner::new(
            LocalSigner::new(keystore.clone(), store.clone()),
            hsm.clone().map(HsmSigner),
            provider.clone(),
        ));
        let evm_clients = Arc::new(EvmClients::new(config.monitor.fee_caps()));
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
        let evm_recovery =
            EvmRecovery::new(store.clone(), signer.clone(), config.monitor.fee_caps());
        let solana_recovery = SolanaRecovery::new(store.clone(), signer.clone());
        let transfers = Transfers {
            evm: EvmPipeline::new(
                store.clone(),
                signer.clone(),
                evm_clients.clone(),
                broadcasts.clone(),
                idempotency.clone(),
                evm_recovery.clone(),
            ),
            solana: SolanaPipeline::new(
                store.clone(),
                signer.clone(),
                solana_clients.clone(),
                broadcasts.clone(),
                idempotency.clone(),
                solana_recovery.clone(),
            ),
        };
        let aggregators =
            Aggregators::from_config(&config.trade).context("the trade aggregators")?;
        let swaps = Swaps::new(
            aggregators.clone(),
            transfers.clone(),
            evm_clients.clone(),
            config.trade.clone(),
        );
        let wallets = Wallets::new(store.clone(), keystore.clone(), provider, hsm);
        Ok(Self(Arc::new(Parts {
            streams: Arc::new(crate::streams::Streams::new(config.streams)),
            keys: ApiKeys::new(store.clone()),
            limits: Limits::new(store.clone()),
            sessions: Sessions::new(store.clone()),
            limiter: Arc::new(limiter),
            webhooks: Webhooks::new(store.clone(), keystore.clone(), config.webhooks.clone()),
            deposits: crate::deposits::Deposits::new(store.clone()),
            payouts_wake: tokio::sync::Notify::new(),
            approvals: Approvals::new(store.clone(), config.approvals.clone()),
            policy: Policy::new(store.clone(), config.limits.clone()),
            guards: crate::guard::Guards::new(store.clone(), signer.clone(), evm_clients.clone()),
            wallets: wallets.clone(),
            transactions: Transactions::new(store.clone()),
            transfers,
            evm_recovery,
            solana_recovery,
            quotes: Quotes::new(
                (aggregators, config.trade.clone()),
                evm_clients.clone(),
                (wallets, store.clone()),
            ),
            swaps,
            balances: Balances::new(evm_clients.clone(), solana_clients.clone()),
            evm_clients,
            solana_clients,
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

    /// Lets a call through `gate`: what the admission layer asks before the call's handler
    /// runs, and the only way in.
    pub async fn admit_call(&self, metadata: &MetadataMap, gate: Gate) -> Result<Admitted> {
        Ok(match gate {
            Gate::Scoped(operation) => Admitted::Caller(self.admit(metadata, operation).await?),
            Gate::AnyCaller => Admitted::Caller(self.admit_any(metadata).await?),
            Gate::Session => {
                let (session, token) = self.session(metadata).await?;
                Admitted::Session { session, token }
            }
            Gate::ChangingSession => {
                let (session, token) = self.changing_session(metadata).await?;
                Admitted::Session { session, token }
            }
            Gate::Open => Admitted::Open,
            Gate::Admin => {
                self.admit_admin(metadata).await?;
                Admitted::Admin
            }
        })
    }

    /// Authenticates the request's `x-api-key`, checks that the key has the scope `operation`
    /// needs (`auth::Operation`, the one table of them), and draws
    /// the request from the caller's budget (`read` from reads, `trade` and `write` from
    /// writes), before the call's handler runs.
    async fn admit(&self, metadata: &MetadataMap, operation: Operation) -> Result<Caller> {
        self.admit_for(metadata, Some(operation.scope())).await
    }

    /// Admits an `AdminService` call by its admin token, compared in constant time. Wrong
    /// tokens are counted per client like failed API keys, and past the limit calls are
    /// refused before the token is compared: an operator's token may be short enough to
    /// guess, unlike a key's 32 random characters, so guessing must stop, not only be told
    /// to. With no token configured every call is refused.
    async fn admit_admin(&self, metadata: &MetadataMap) -> Result<()> {
        let subjects = [format!("admin:client:{}", client_address(metadata))];
        let limit = self.limiter.failed_auth();
        self.limiter.check_failures(limit, &subjects).await?;
        let checked = self.compare_admin_token(metadata);
        if let Err(WalletOpsError::Unauthorized(_)) = &checked {
            self.limiter.record_failure(limit, &subjects).await;
        }
        checked
    }

    fn compare_admin_token(&self, metadata: &MetadataMap) -> Result<()> {
        use subtle::ConstantTimeEq;
        let expected = self.config.admin_token.as_ref().ok_or_else(|| {
            WalletOpsError::ServiceUnavailable(
                "the admin API is disabled: set admin_token (WALLETOPS_ADMIN_TOKEN)".to_owned(),
            )
        })?;
        let presented = metadata
            .get(walletops_proto::ADMIN_TOKEN_HEADER)
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        // Digests, compared in constant time: comparing the tokens themselves would end
        // early on a length mismatch, and tell the token's length.
        let digest = |b: &[u8]| <sha2::Sha256 as sha2::Digest>::digest(b);
        if bool::from(
            digest(presented)
                .as_slice()
                .ct_eq(digest(expected.expose().as_bytes()).as_slice()),
        ) {
            Ok(())
        } else {
            Err(WalletOpsError::Unauthorized("bad admin token"))
        }
    }

    /// `admit` for a call any key may make, whatever its scopes (asking who the caller is
    /// and what it may do), drawn from no budget: it costs what authenticating any request
    /// costs, and the MCP gate asks it before each request it lets through, which must not
    /// spend the caller's reads twice. Failed authentication is still counted.
    async fn admit_any(&self, metadata: &MetadataMap) -> Result<Caller> {
        self.admit_for(metadata, None).await
    }

    async fn admit_for(&self, metadata: &MetadataMap, scope: Option<Scope>) -> Result<Caller> {
        let caller = self
            .authenticate(metadata, scope.unwrap_or(Scope::Read))
            .await?;
        tracing::Span::current().record("key", caller.label().as_str());
        if let Some(scope) = scope {
            caller.require(scope)?;
        }
        let budget = match scope {
            None => None,
            Some(Scope::Read) => Some(Budget::Read),
            Some(Scope::Trade | Scope::Write) => Some(Budget::Write),
        };
        if let Some(budget) = budget {
            let drawer = self.keys.drawer(&caller).await?;
            self.limiter.admit(drawer, budget).await?;
        }
        if let Some(why) = metadata.get_bin(UNREADABLE_HEADER) {
            return Err(unreadable(why.to_bytes().ok().as_deref()));
        }
        Ok(caller)
    }

    /// The caller: by its `x-api-key`, or (with no key) by its dashboard session, whose
    /// requests beyond reading must carry the session's CSRF token.
    async fn authenticate(&self, metadata: &MetadataMap, scope: Scope) -> Result<Caller> {
        if metadata.get(API_KEY_HEADER).is_none() && metadata.get(SESSION_TOKEN_HEADER).is_some() {
            let session = if scope == Scope::Read {
                self.session(metadata).await?.0
            } else {
                self.changing_session(metadata).await?.0
            };
            return Ok(Caller {
                user_id: session.user_id,
                scopes: Scopes::ALL,
                credential: Credential::Session { id: session.id },
            });
        }
        let presented = metadata
            .get(API_KEY_HEADER)
            .map(|v| v.to_str().unwrap_or_default());
        self.keys
            .authenticate(
                presented,
                &self.limiter,
                client_address(metadata),
                scope == Scope::Read,
            )
            .await
    }

    /// The open dashboard session of the request's `x-session-token`, and that token.
    async fn session(&self, metadata: &MetadataMap) -> Result<(DashboardSession, String)> {
        let token = metadata
            .get(SESSION_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        Ok((self.sessions.check(&token).await?, token))
    }

    /// The open dashboard session of a request that changes something: it must carry the
    /// session's CSRF token (`x-csrf-token`); the session and its token.
    async fn changing_session(&self, metadata: &MetadataMap) -> Result<(DashboardSession, String)> {
        let (session, token) = self.session(metadata).await?;
        let csrf = metadata
            .get(CSRF_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok());
        Sessions::check_csrf(&token, csrf)?;
        Ok((session, token))
    }

    /// The decimals and symbol of `asset` on chain `slug` when known without a chain read,
    /// so answers can give amounts a page shows in whole units.
    pub fn units(&self, slug: &str, asset: &str) -> Option<(u32, String)> {
        self.balances.known_units_on(&self.chains, slug, asset)
    }

    /// The units known without a chain read, for a service that names amounts.
    pub fn units_known(&self) -> Units {
        Units::new(self.chains.clone(), self.balances.clone())
    }

    /// The users, for the operators' services.
    pub fn users(&self) -> crate::auth::Users {
        crate::auth::Users::new(self.store.clone(), self.keys.clone())
    }

    /// What users' wallets hold, for a service that shows it.
    pub fn holdings(&self) -> crate::holdings::Holdings {
        crate::holdings::Holdings::new(
            self.wallets.clone(),
            self.transactions.clone(),
            self.chains.clone(),
            self.balances.clone(),
        )
    }
}

/// What a call was let in as, handed to its handler by the admission layer.
#[derive(Debug, Clone)]
pub enum Admitted {
    /// A key or a dashboard session, as the caller of an operation.
    Caller(Caller),
    /// An open dashboard session, and the token it was presented by.
    Session {
        /// The session.
        session: DashboardSession,
        /// Its token, from which its CSRF token is derived.
        token: String,
    },
    /// The operators, by the admin token.
    Admin,
    /// Anyone: a call that needs no credential.
    Open,
}

/// The address of the client of a call, as the gRPC server resolved it (`grpc::client`);
/// `unknown` for a call that did not come through it.
pub fn client_address(metadata: &MetadataMap) -> &str {
    metadata
        .get(CLIENT_ADDRESS_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown")
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
