//! The agent surface: WalletOps as a Model Context Protocol server, over the streamable HTTP
//! transport at `/mcp` (and over stdio through `stdio`, a bridge to it). Like every REST
//! route, a tool turns its input into a core request, calls the core with the caller's key
//! and answers the REST JSON: scopes, rate limits, idempotency, ownership, delegation and
//! the swap guard are the core's, unchanged. A key sees only the tools its scopes allow.
//!
//! - `calls`: how a tool call becomes a core call (its headers, a write's key) and its
//!   answer.
//! - `gate`: the door: a valid key on every request (401 with a challenge otherwise), and
//!   at most so many sessions per key.
//! - `inputs`: the tools' typed inputs, their schemas, and the core requests they become.
//! - `stdio`: `walletops mcp`, a stdio server for desktop agents that calls a service's
//!   `/mcp`.

mod calls;
mod chain_data;
mod gate;
mod inputs;
pub(crate) mod stdio;

use crate::CoreChannel;
use axum::http::request::Parts;
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{
        CacheScope, CallToolResult, Implementation, InitializeResult, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities,
    },
    service::RequestContext,
    tool, tool_handler, tool_router,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use walletops_proto::v1::{
    self as pb, approval_service_client::ApprovalServiceClient,
    deposit_service_client::DepositServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};

use self::{
    calls::{answer, headers, input_json, tool_call, write},
    inputs::{
        ApproveInput, GetApprovalInput, GetBalancesInput, GetTransactionInput, ListDepositsInput,
        ListWalletsInput, QuoteInput, SendInput, SimulateInput, SwapInput,
    },
};
use crate::{
    model::{
        ApprovalJson, BalancesJson, DepositsJson, DryRunJson, QuoteResponseJson, TransactionJson,
        WalletsJson, deposit_state,
    },
    routes::call,
};

/// The tools, over a core.
#[derive(Clone)]
pub(crate) struct Tools {
    core: WalletOpsServiceClient<CoreChannel>,
    approvals: ApprovalServiceClient<CoreChannel>,
    deposits: DepositServiceClient<CoreChannel>,
    tool_router: ToolRouter<Self>,
}

/// The core's method each tool calls. Which of them a key may call is the core's to say
/// (`GetCurrentApiKey`'s `operations`, from its one table of scopes); the list shows those
/// tools alone, and the core checks the scope again on every call. A tool not named here
/// is never listed.
fn method_of(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "list_wallets" => "/walletops.v1.WalletOpsService/ListWallets",
        "get_balances" => "/walletops.v1.WalletOpsService/GetBalances",
        "get_transaction" => "/walletops.v1.WalletOpsService/GetTransaction",
        "get_approval" => "/walletops.v1.ApprovalService/GetApproval",
        "list_deposits" => "/walletops.v1.DepositService/ListDeposits",
        "quote_swap" => "/walletops.v1.WalletOpsService/GetQuote",
        "swap" => "/walletops.v1.WalletOpsService/Swap",
        "send" => "/walletops.v1.WalletOpsService/Send",
        "approve_token" => "/walletops.v1.WalletOpsService/ApproveToken",
        "simulate" => "/walletops.v1.WalletOpsService/SimulateWrite",
        _ => return None,
    })
}

#[tool_router]
impl Tools {
    fn new(core: CoreChannel) -> Self {
        Self {
            core: WalletOpsServiceClient::new(core.clone()),
            approvals: ApprovalServiceClient::new(core.clone()),
            deposits: DepositServiceClient::new(core),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "List the wallets you may use, with their addresses, chain family \
        (ethereum or solana), whether each is the default of its family, and whether it is \
        delegated to the service (automationEnabled: only those can send). Needs the read \
        scope. Errors come back as {error, code}: UNAUTHORIZED (bad or revoked key), \
        RATE_LIMITED (wait and retry).",
        title = "List wallets",
        annotations(
            title = "List wallets",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn list_wallets(
        &self,
        Parameters(input): Parameters<ListWalletsInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let headers = headers(&ctx);
        let result = async {
            let reply = self
                .core
                .clone()
                .list_wallets(call(&headers, Ok(input.into()))?)
                .await?;
            Ok(WalletsJson::from(reply.into_inner()))
        };
        Ok(answer(result.await, &headers))
    }

    #[tool(
        description = "Read a wallet's balances on one chain: the native coin and any \
        tokens asked for. Amounts are integer strings in base units (wei, lamports, the \
        token's smallest unit), with the token's decimals beside them. Needs the read scope. \
        Errors: CHAIN_UNKNOWN, WALLET_NOT_FOUND, FORBIDDEN (not your wallet), INVALID_INPUT \
        (names the field).",
        title = "Read balances",
        annotations(
            title = "Read balances",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = true
        )
    )]
    async fn get_balances(
        &self,
        Parameters(input): Parameters<GetBalancesInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let headers = headers(&ctx);
        let result = async {
            let reply = self
                .core
                .clone()
                .get_balances(call(&headers, Ok(input.into()))?)
                .await?;
            Ok(BalancesJson::from(reply.into_inner()))
        };
        Ok(answer(result.await, &headers))
    }

    #[tool(
        description = "Read one of your transactions by its service id: status \
        (SUBMITTED while pending; CONFIRMED, REVERTED, FAILED, DROPPED when final; \
        FEE_CAPPED when stuck below the fee cap), hash, explorer link and status history. \
        Needs the read scope. Errors: NOT_FOUND, INVALID_INPUT.",
        title = "Read a transaction",
        annotations(
            title = "Read a transaction",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn get_transaction(
        &self,
        Parameters(input): Parameters<GetTransactionInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let headers = headers(&ctx);
        let result = async {
            let req = pb::GetTransactionRequest { id: input.id };
            let reply = self
                .core
                .clone()
                .get_transaction(call(&headers, Ok(req))?)
                .await?;
            Ok(TransactionJson::from(
                reply.into_inner().transaction.unwrap_or_default(),
            ))
        };
        Ok(answer(result.await, &headers))
    }

    #[tool(
        description = "List money that arrived at your wallets from outside (deposits), \
        newest first: chain, wallet, asset (native, a token address or a mint), amount in \
        base units with decimals and symbol when known, sender, transaction hash and state \
        (PENDING once seen, CONFIRMED once deep enough, REVERTED if its block left the \
        chain, IGNORED for tokens off the chain's list or dust). Only chains the operator \
        scans for deposits have any. Pass nextCursor back as cursor for the next page. \
        Needs the read scope. Errors: CHAIN_UNKNOWN, INVALID_INPUT (names the field).",
        title = "List deposits",
        annotations(
            title = "List deposits",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn list_deposits(
        &self,
        Parameters(input): Parameters<ListDepositsInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let headers = headers(&ctx);
        let result = async {
            let state = deposit_state(input.state.as_deref())
                .map_err(|e| crate::error::EdgeError::invalid("state", e))?;
            let req = pb::ListDepositsRequest {
                chain: input.chain,
                wallet: input.wallet,
                state: state.into(),
                since: None,
                page_size: input.limit.unwrap_or(0),
                page_token: input.cursor,
            };
            let reply = self
                .deposits
                .clone()
                .list_deposits(call(&headers, Ok(req))?)
                .await?;
            Ok(DepositsJson::from(reply.into_inner()))
        };
        Ok(answer(result.await, &headers))
    }

    #[tool(
        description = "Read a write of yours held for approval, by the approval id a \
        write answered with PENDING_APPROVAL: state (pending; approved while it is being \
        made; submitted, with transactionId to follow with get_transaction; rejected, with \
        who and why; expired; failed, with the error). Needs the read scope. Errors: \
        NOT_FOUND, INVALID_INPUT.",
        title = "Read an approval",
        annotations(
            title = "Read an approval",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn get_approval(
        &self,
        Parameters(input): Parameters<GetApprovalInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let headers = headers(&ctx);
        let result = async {
            let req = pb::GetApprovalRequest { id: input.id };
            let reply = self
                .approvals
                .clone()
                .get_approval(call(&headers, Ok(req))?)
                .await?;
            Ok(ApprovalJson::from(
                reply.into_inner().approval.unwrap_or_default(),
            ))
        };
        Ok(answer(result.await, &headers))
    }

    #[tool(
        description = "Price a swap without doing it: how much of toToken an amount of \
        fromToken buys now (base units), and, given the wallet, whether an ERC20 approval \
        of which spender is needed first. NATIVE names the chain's coin. Needs the trade \
        scope. Errors: QUOTE_FAILED (no route, or the aggregator refused), \
        SERVICE_UNAVAILABLE (no aggregator for the chain), INVALID_INPUT.",
        title = "Quote a swap",
        annotations(
            title = "Quote a swap",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = true
        )
    )]
    async fn quote_swap(
        &self,
        Parameters(input): Parameters<QuoteInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let headers = headers(&ctx);
        let result = async {
            let reply = self
                .core
                .clone()
                .get_quote(call(&headers, Ok(input.into()))?)
                .await?;
            Ok(QuoteResponseJson::from(reply.into_inner()))
        };
        Ok(answer(result.await, &headers))
    }

    #[tool(
        description = "Swap tokens from one of your wallets at the current quote, within \
        slippage percent; signed and sent once, answered with the transaction's id to \
        follow with get_transaction. Amount in the sold token's base units; NATIVE names \
        the chain's coin. An ERC20 sale may need approve_token first (quote_swap says). \
        Needs the write scope. Your key's spend limits and policy apply (a maximum per write and a daily budget per asset; \
        allowed chains, recipients, contracts, spenders), judged on what the write does on chain: \
        a write outside them is FORBIDDEN and nothing is signed. To check first, call simulate \
        with the same fields (a dry run: nothing is signed or sent). Errors: INSUFFICIENT_FUNDS, QUOTE_FAILED, SEND_FAILED (the \
        swap guard or the node refused), FORBIDDEN, IDEMPOTENT_REPLAY (the key was used for \
        another request). A write moving more than the key's approval threshold is not \
        signed: it answers status PENDING_APPROVAL (pending_approval) and an approval id; \
        a person approves or rejects it, and get_approval tells which.",
        title = "Swap tokens",
        annotations(
            title = "Swap tokens",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn swap(
        &self,
        Parameters(input): Parameters<SwapInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let given = input.idempotency_key.clone();
        let arguments = input_json(&input);
        let mut core = self.core.clone();
        Ok(write(
            &ctx,
            "swap",
            given.as_deref(),
            arguments,
            |headers| async move {
                let reply = core.swap(tool_call(&headers, Ok(input.into()))?).await?;
                Ok(reply.into_inner().submission)
            },
        )
        .await)
    }

    #[tool(
        description = "Send the native coin or a token from one of your wallets. amount \
        is an integer string in base units: wei (1 ETH = 1000000000000000000), lamports \
        (1 SOL = 1000000000) or the token's smallest unit; asset is native, erc20 or spl. \
        Signed and sent exactly once per idempotency key, answered with the transaction's \
        id (follow it with get_transaction). Needs the write scope. Your key's spend limits and policy apply (a maximum per write and a daily budget per asset; \
        allowed chains, recipients, contracts, spenders), judged on what the write does on chain: \
        a write outside them is FORBIDDEN and nothing is signed. To check first, call simulate \
        with the same fields (a dry run: nothing is signed or sent). Errors: \
        INSUFFICIENT_FUNDS, FORBIDDEN (not your wallet, or outside the key's limits), \
        WALLET_NOT_DELEGATED, SEND_FAILED (the node refused), IDEMPOTENT_REPLAY, \
        INVALID_INPUT (names the field). A write moving more than the key's approval threshold is not \
        signed: it answers status PENDING_APPROVAL (pending_approval) and an approval id; \
        a person approves or rejects it, and get_approval tells which.",
        title = "Send coins or tokens",
        annotations(
            title = "Send coins or tokens",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn send(
        &self,
        Parameters(input): Parameters<SendInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let given = input.idempotency_key.clone();
        let arguments = input_json(&input);
        let mut core = self.core.clone();
        Ok(write(
            &ctx,
            "send",
            given.as_deref(),
            arguments,
            |headers| async move {
                let reply = core.send(tool_call(&headers, Ok(input.into()))?).await?;
                Ok(reply.into_inner().submission)
            },
        )
        .await)
    }

    #[tool(
        description = "Check a write before you make it: give exactly one of send, \
        approveToken or swap, with the fields its own tool takes. Nothing is signed or \
        sent. Answers what it would do to the wallet as simulated on the chain (effects: \
        outflows, inflows and allowances granted, per asset), whether your key's limits \
        allow it (verdict: allowed, needsApproval, every reason), and the most its network \
        fee may cost. Needs the read scope. Errors as the write itself would meet them \
        before its verdict: INVALID_INPUT, INSUFFICIENT_FUNDS, SEND_FAILED (it would fail).",
        title = "Check a write (dry run)",
        annotations(
            title = "Check a write (dry run)",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = true
        )
    )]
    async fn simulate(
        &self,
        Parameters(input): Parameters<SimulateInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let headers = headers(&ctx);
        let result = async {
            let req = input
                .into_write()
                .map(|w| pb::SimulateWriteRequest { write: Some(w) });
            let reply = self
                .core
                .clone()
                .simulate_write(call(&headers, req)?)
                .await?;
            Ok(DryRunJson::from(reply.into_inner()))
        };
        Ok(answer(result.await, &headers))
    }

    #[tool(
        description = "Allow a spender (a swap router) to move up to amount of an ERC20 \
        token from one of your EVM wallets; amount in the token's base units. Signed and \
        sent once per idempotency key. Needs the write scope. Your key's spend limits and policy apply (a maximum per write and a daily budget per asset; \
        allowed chains, recipients, contracts, spenders), judged on what the write does on chain: \
        a write outside them is FORBIDDEN and nothing is signed. To check first, call simulate \
        with the same fields (a dry run: nothing is signed or sent). Errors as for send. A write moving more than the key's approval threshold is not \
        signed: it answers status PENDING_APPROVAL (pending_approval) and an approval id; \
        a person approves or rejects it, and get_approval tells which.",
        title = "Approve a token spender",
        annotations(
            title = "Approve a token spender",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn approve_token(
        &self,
        Parameters(input): Parameters<ApproveInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let given = input.idempotency_key.clone();
        let arguments = input_json(&input);
        let mut core = self.core.clone();
        Ok(write(
            &ctx,
            "approve_token",
            given.as_deref(),
            arguments,
            |headers| async move {
                let reply = core
                    .approve_token(tool_call(&headers, Ok(input.into()))?)
                    .await?;
                Ok(reply.into_inner().submission)
            },
        )
        .await)
    }
}

/// What the server says of itself at initialization.
fn server_info() -> InitializeResult {
    InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
        .with_server_info(Implementation::new("walletops", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "WalletOps acts on your own custodial wallets (EVM chains and Solana) under your \
             API key: read wallets, balances and transactions, quote and execute swaps, send \
             coins and tokens, approve spenders. Amounts are integer strings in base units. \
             A write over your key's approval threshold waits for a person (status \
             PENDING_APPROVAL; follow it with get_approval). A failed call answers {error, \
             code, requestId}; the code says what to do.",
        )
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> InitializeResult {
        server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // The gate asked the core what the key may call before the request came here.
        let operations = ctx
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<gate::Admitted>())
            .map(|a| a.operations.as_slice())
            .unwrap_or_default();
        let tools = self
            .tool_router
            .list_all()
            .into_iter()
            .filter(|t| method_of(&t.name).is_some_and(|m| operations.iter().any(|o| o == m)))
            .collect();
        Ok(ListToolsResult::with_all_items(tools)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }
}

/// The MCP endpoint over `core`, for `/mcp`, behind its gate: a key on every request, at
/// most `sessions_per_key` sessions open per key.
pub(crate) fn service(core: CoreChannel, sessions_per_key: usize) -> axum::Router {
    let sessions = std::sync::Arc::new(LocalSessionManager::default());
    let gate = gate::Gate::new(core.clone(), sessions.clone(), sessions_per_key);
    let mcp = StreamableHttpService::new(
        move || Ok(Tools::new(core.clone())),
        sessions,
        // Every call carries an API key the core checks, so no Host allowlist: the listener
        // is reached by whatever name the operator gives it.
        StreamableHttpServerConfig::default().disable_allowed_hosts(),
    );
    axum::Router::new()
        .fallback_service(mcp)
        .layer(axum::middleware::from_fn_with_state(gate, gate::admit))
}
