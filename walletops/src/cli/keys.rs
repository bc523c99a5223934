//! `walletops keys`: API keys, their spend limits, policies and frozen lines.

use clap::Subcommand;
use walletops_core::{auth::Expiration, bootstrap::FIRST_USER};
use walletops_domain::Scopes;

#[derive(Debug, Subcommand)]
pub(crate) enum KeysCommand {
    /// Create a key and print its value (shown once).
    Create {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Descriptive name.
        #[arg(long)]
        name: String,
        /// Lifetime: never, 7d, 30d, 90d, 180d or 1y.
        #[arg(long, default_value = "never")]
        expires: Expiration,
        /// What the key may do: a comma-separated subset of read, trade, write.
        #[arg(long, default_value = "read,trade,write")]
        scopes: Scopes,
    },
    /// List a user's keys (never their values).
    List {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
    },
    /// Limit what a key may move of one asset on one chain (any of the three limits), or
    /// what its writes may pay in fees there a day (`--fees-per-day`; `--asset fees` names
    /// that budget), or remove the limit (`--remove`). Held against every write of the key.
    Limit {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Key id or 4-character prefix.
        key: String,
        /// Chain slug.
        #[arg(long)]
        chain: String,
        /// `native`, or a token address (EVM) or mint (Solana).
        #[arg(long, default_value = "native")]
        asset: String,
        /// The most one write may move, in base units.
        #[arg(long)]
        max_per_tx: Option<String>,
        /// The most the writes of a rolling 24 hours may move, in base units.
        #[arg(long)]
        daily: Option<String>,
        /// A write that moves more than this, in base units, waits for a person's approval
        /// (`walletops approvals`).
        #[arg(long)]
        approve_above: Option<String>,
        /// The most the writes of a rolling 24 hours may pay in network fees on the chain,
        /// in the native coin's base units (the budget `--asset fees` names; a limited key
        /// without one has the chain's `limits.default_fees_per_day`).
        #[arg(long, conflicts_with_all = ["asset", "max_per_tx", "daily", "approve_above"])]
        fees_per_day: Option<String>,
        /// The most gas one write may be signed with on the chain (EVM gas limit, Solana
        /// compute units): a write above it is refused (the limit `--asset gas` names).
        #[arg(long, conflicts_with_all = ["asset", "max_per_tx", "daily", "approve_above", "fees_per_day"])]
        max_gas: Option<String>,
        /// Remove the limit instead.
        #[arg(long, conflicts_with_all = ["max_per_tx", "daily", "approve_above", "fees_per_day", "max_gas"])]
        remove: bool,
    },
    /// Add a rule to a key's policy, or remove it (`--remove`). With `--recipient`,
    /// `--contract`, `--spender` or `--token` the rule allows that account on the chain;
    /// with none, it allows the chain itself. A key with any rule of a kind may do only what that kind's
    /// rules allow.
    Allow {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Key id or 4-character prefix.
        key: String,
        /// Chain slug.
        #[arg(long)]
        chain: String,
        /// An account the key's writes may send to (read from their effects).
        #[arg(long, group = "target")]
        recipient: Option<String>,
        /// A contract the key's contract calls may call (EVM).
        #[arg(long, group = "target")]
        contract: Option<String>,
        /// Only this function of `--contract`: a selector (0xa9059cbb) or a signature
        /// (`transfer(address,uint256)`).
        #[arg(long, requires = "contract")]
        function: Option<String>,
        /// An account the key's writes may grant an allowance, delegation or authority.
        #[arg(long, group = "target")]
        spender: Option<String>,
        /// A token (a mint on Solana) the key's swaps may buy: a key with recipient or token
        /// rules swaps only into the native coin and its listed tokens.
        #[arg(long, group = "target")]
        token: Option<String>,
        /// Remove the rule instead.
        #[arg(long)]
        remove: bool,
    },
    /// Let a frozen key line write again. A line freezes when one of its writes moved more
    /// on chain than its simulation reserved; the excess stays charged to its budget.
    Unfreeze {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Id or 4-character prefix of any key of the line.
        key: String,
    },
    /// Show a key's policy: the chains, recipients, contracts, spenders and tokens it allows.
    Policy {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Key id or 4-character prefix.
        key: String,
    },
    /// Show a key's spend limits with what is spent and left of each.
    Limits {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Key id or 4-character prefix.
        key: String,
    },
    /// Revoke a key at once and for good.
    Revoke {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Key id or 4-character prefix.
        key: String,
    },
}
