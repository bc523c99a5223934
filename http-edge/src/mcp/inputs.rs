//! The MCP tools' inputs: typed structs whose JSON Schemas the tools publish, with field
//! descriptions written for a model, each turned into the same core request as its REST
//! route's body. Every field defaults when absent, as a REST body's does, so that the core
//! names each missing one with the other violations; the schemas still list the fields a
//! call needs as `required`, for the model to fill them in.

use schemars::JsonSchema;
use serde::Deserialize;
use walletops_proto::v1 as pb;

use crate::model::{ApproveBody, QuoteBody, SendBody, SwapBody};

/// `list_wallets`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ListWalletsInput {
    /// Only wallets of this chain family: "ethereum" (one address serves every EVM chain)
    /// or "solana". Omit for both.
    pub(crate) chain: Option<String>,
    /// Only the default wallet of each family (the one a write uses when "from" is omitted).
    pub(crate) default_only: Option<bool>,
    /// Only wallets delegated to the service's signer: the ones writes can be sent from.
    pub(crate) automation_only: Option<bool>,
}

impl From<ListWalletsInput> for pb::ListWalletsRequest {
    fn from(i: ListWalletsInput) -> Self {
        Self {
            chain: i.chain,
            default_only: i.default_only,
            automation_only: i.automation_only,
        }
    }
}

/// `get_balances`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("required" = ["chain"]))]
pub(crate) struct GetBalancesInput {
    /// Chain slug, as `list_wallets` and the operator name them: "ethereum", "base",
    /// "base-sepolia", "solana", "solana-devnet", "anvil", ...
    pub(crate) chain: String,
    /// One of the caller's wallets; omit for the default wallet of the chain's family.
    pub(crate) address: Option<String>,
    /// Token addresses (EVM) or mints (Solana) to read besides the native coin, at most 50.
    pub(crate) tokens: Vec<String>,
    /// Also list tokens whose balance is zero.
    pub(crate) include_zero: Option<bool>,
    /// Read the chain now instead of a balance cached for up to 45 seconds.
    pub(crate) fresh: Option<bool>,
}

impl From<GetBalancesInput> for pb::GetBalancesRequest {
    fn from(i: GetBalancesInput) -> Self {
        Self {
            chain: i.chain,
            address: i.address,
            tokens: i.tokens,
            include_zero: i.include_zero,
            fresh: i.fresh,
        }
    }
}

/// `get_transaction`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("required" = ["id"]))]
pub(crate) struct GetTransactionInput {
    /// The transaction's service id (a UUID), as a write answered it.
    pub(crate) id: String,
}

/// `list_deposits`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ListDepositsInput {
    /// Only this chain's (slug).
    pub(crate) chain: Option<String>,
    /// Only this wallet's: its id or address.
    pub(crate) wallet: Option<String>,
    /// Only deposits in this state: pending, confirmed, reverted or ignored.
    pub(crate) state: Option<String>,
    /// Deposits per page, 1 to 500 (default 50).
    pub(crate) limit: Option<u32>,
    /// The nextCursor of the previous page.
    pub(crate) cursor: Option<String>,
}

/// `get_approval`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
#[schemars(extend("required" = ["id"]))]
pub(crate) struct GetApprovalInput {
    /// The approval id (a UUID) a write answered with status PENDING_APPROVAL.
    pub(crate) id: String,
}

/// `send`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("required" = ["chain", "to", "asset", "amount"]))]
pub(crate) struct SendInput {
    /// Chain slug ("base", "solana", "anvil", ...).
    pub(crate) chain: String,
    /// The caller's wallet to send from; omit for its default wallet of the chain's family.
    pub(crate) from: Option<String>,
    /// Recipient address: 0x and 40 hex digits on EVM chains, a base58 public key on Solana.
    /// For tokens, the recipient's wallet (its token account is found or made).
    pub(crate) to: String,
    /// "native" (ETH, SOL, ... the chain's coin), "erc20" (EVM token) or "spl" (Solana
    /// token).
    pub(crate) asset: String,
    /// The token's address (erc20) or mint (spl); omit for native.
    pub(crate) token: Option<String>,
    /// How much, as an integer string in base units: wei for ETH (1 ETH = 10^18), lamports
    /// for SOL (1 SOL = 10^9), the token's smallest unit otherwise (read its decimals
    /// first). Never a decimal fraction.
    pub(crate) amount: String,
    /// A UUID naming this payment: a call repeated with the same key and arguments pays
    /// once and answers as the first did. Omitted: one is made from this tool call's id.
    pub(crate) idempotency_key: Option<String>,
}

impl From<SendInput> for pb::SendRequest {
    fn from(i: SendInput) -> Self {
        SendBody {
            chain: i.chain,
            from: i.from,
            to: i.to,
            asset: i.asset,
            token: i.token,
            amount: i.amount,
        }
        .into()
    }
}

/// `approve_token`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("required" = ["chain", "token", "spender", "amount"]))]
pub(crate) struct ApproveInput {
    /// EVM chain slug.
    pub(crate) chain: String,
    /// The caller's wallet that grants the allowance; omit for its default EVM wallet.
    pub(crate) from: Option<String>,
    /// The ERC20 token's address.
    pub(crate) token: String,
    /// The address allowed to spend (a swap router: `quote_swap` names it).
    pub(crate) spender: String,
    /// The allowance, an integer string in the token's base units.
    pub(crate) amount: String,
    /// A UUID naming this approval (see `send`). Omitted: one is made from the call's id.
    pub(crate) idempotency_key: Option<String>,
}

impl From<ApproveInput> for pb::ApproveTokenRequest {
    fn from(i: ApproveInput) -> Self {
        ApproveBody {
            chain: i.chain,
            from: i.from,
            token: i.token,
            spender: i.spender,
            amount: i.amount,
        }
        .into()
    }
}

/// `quote_swap`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("required" = ["chain", "fromToken", "toToken", "amount"]))]
pub(crate) struct QuoteInput {
    /// Chain slug ("ethereum", "base", "solana", ...).
    pub(crate) chain: String,
    /// The token sold: its address or mint, or "NATIVE" for the chain's coin.
    pub(crate) from_token: String,
    /// The token bought: its address or mint, or "NATIVE".
    pub(crate) to_token: String,
    /// How much to sell, an integer string in the sold token's base units.
    pub(crate) amount: String,
    /// The wallet that would swap: the answer then says whether an ERC20 approval is
    /// needed first, and for which spender.
    pub(crate) from: Option<String>,
}

impl From<QuoteInput> for pb::GetQuoteRequest {
    fn from(i: QuoteInput) -> Self {
        QuoteBody {
            chain: i.chain,
            from_token: i.from_token,
            to_token: i.to_token,
            amount: i.amount,
            from: i.from,
            ..QuoteBody::default()
        }
        .into()
    }
}

/// `swap`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
#[schemars(extend("required" = ["chain", "fromToken", "toToken", "amount"]))]
pub(crate) struct SwapInput {
    /// Chain slug ("ethereum", "base", "solana", ...).
    pub(crate) chain: String,
    /// The caller's wallet that swaps; omit for its default wallet of the chain's family.
    pub(crate) from: Option<String>,
    /// The token sold: its address or mint, or "NATIVE" for the chain's coin.
    pub(crate) from_token: String,
    /// The token bought: its address or mint, or "NATIVE".
    pub(crate) to_token: String,
    /// How much to sell, an integer string in the sold token's base units.
    pub(crate) amount: String,
    /// The most the price may move against the swap, in percent (0 to 50, default 1).
    pub(crate) slippage: Option<f64>,
    /// The `quoteId` of a `quote` this key asked for in the last 60 seconds: the swap then
    /// pays at least its `dstAmount` less the slippage.
    pub(crate) quote_id: Option<String>,
    /// The least of the token bought the swap must pay, in its base units.
    pub(crate) min_dst_amount: Option<String>,
    /// A UUID naming this swap (see `send`). Omitted: one is made from the call's id.
    pub(crate) idempotency_key: Option<String>,
}

impl From<SwapInput> for pb::SwapRequest {
    fn from(i: SwapInput) -> Self {
        SwapBody {
            chain: i.chain,
            from: i.from,
            from_token: i.from_token,
            to_token: i.to_token,
            amount: i.amount,
            slippage: i.slippage,
            quote_id: i.quote_id,
            min_dst_amount: i.min_dst_amount,
            ..SwapBody::default()
        }
        .into()
    }
}

/// `simulate`: exactly one of the writes, as its own tool takes it (its idempotency key is
/// not needed and ignored).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SimulateInput {
    /// A `send`, simulated.
    pub(crate) send: Option<SendInput>,
    /// An `approve_token`, simulated.
    pub(crate) approve_token: Option<ApproveInput>,
    /// A `swap`, simulated.
    pub(crate) swap: Option<SwapInput>,
}

impl SimulateInput {
    /// The write it names, or what is wrong with it.
    pub(crate) fn into_write(
        self,
    ) -> Result<pb::simulate_write_request::Write, crate::error::EdgeError> {
        use pb::simulate_write_request::Write;
        match (self.send, self.approve_token, self.swap) {
            (Some(send), None, None) => Ok(Write::Send(send.into())),
            (None, Some(approve), None) => Ok(Write::ApproveToken(approve.into())),
            (None, None, Some(swap)) => Ok(Write::Swap(swap.into())),
            _ => Err(crate::error::EdgeError::invalid(
                "simulate",
                "give exactly one of send, approveToken, swap",
            )),
        }
    }
}
