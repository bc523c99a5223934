//! Helpers for tests, working only through JSON-RPC with real signed transactions: SPL
//! mints, minting to an owner's associated token account, token balances, landed
//! transactions, and the node's test-control methods.

use anyhow::{Context, bail};
use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client_api::{
    client_error::Error as ClientError,
    request::{RpcRequest, TokenAccountsFilter},
};
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::{Instruction, Transaction};
use spl_associated_token_account_interface::{
    address::get_associated_token_address_with_program_id,
    instruction::create_associated_token_account_idempotent,
};
use spl_token_2022_interface::{
    extension::{ExtensionType, StateWithExtensions},
    instruction::{initialize_mint2, mint_to_checked},
    state::Mint,
};

/// Signs `instructions` with `signers` (the first pays) over the latest blockhash and
/// sends them, waiting until the transaction is finalized.
pub(crate) async fn send(
    rpc: &RpcClient,
    instructions: &[Instruction],
    signers: &[&Keypair],
) -> anyhow::Result<Signature> {
    let payer = signers.first().context("a transaction needs a fee payer")?;
    let blockhash = rpc.get_latest_blockhash().await?;
    let tx =
        Transaction::new_signed_with_payer(instructions, Some(&payer.pubkey()), signers, blockhash);
    Ok(rpc.send_and_confirm_transaction(&tx).await?)
}

/// Creates a mint of `token_program` (SPL Token or Token-2022) with `decimals`, whose mint
/// authority is `payer`, and returns its address.
pub async fn create_mint(
    rpc: &RpcClient,
    payer: &Keypair,
    token_program: &Pubkey,
    decimals: u8,
) -> anyhow::Result<Pubkey> {
    let mint = Keypair::new();
    let space = ExtensionType::try_calculate_account_len::<Mint>(&[])?;
    let rent = rpc.get_minimum_balance_for_rent_exemption(space).await?;
    let instructions = [
        solana_system_interface::instruction::create_account(
            &payer.pubkey(),
            &mint.pubkey(),
            rent,
            u64::try_from(space)?,
            token_program,
        ),
        initialize_mint2(
            token_program,
            &mint.pubkey(),
            &payer.pubkey(),
            None,
            decimals,
        )?,
    ];
    send(rpc, &instructions, &[payer, &mint])
        .await
        .with_context(|| format!("creating a mint of {token_program}"))?;
    Ok(mint.pubkey())
}

/// Mints `amount` base units of `mint` (whose mint authority is `payer`) to `owner`'s
/// associated token account, creating that account idempotently in the same transaction.
pub async fn mint_to(
    rpc: &RpcClient,
    payer: &Keypair,
    mint: &Pubkey,
    owner: &Pubkey,
    amount: u64,
) -> anyhow::Result<Signature> {
    let (token_program, decimals) = mint_info(rpc, mint).await?;
    let ata = get_associated_token_address_with_program_id(owner, mint, &token_program);
    let instructions = [
        create_associated_token_account_idempotent(&payer.pubkey(), owner, mint, &token_program),
        mint_to_checked(
            &token_program,
            mint,
            &ata,
            &payer.pubkey(),
            &[],
            amount,
            decimals,
        )?,
    ];
    send(rpc, &instructions, &[payer])
        .await
        .with_context(|| format!("minting {amount} of {mint} to {owner}"))
}

/// Mints `amount` base units of `mint` into `owner`'s existing associated token account, in
/// a transaction that names the account and not its owner (as a transfer to it does).
pub async fn mint_to_existing(
    rpc: &RpcClient,
    payer: &Keypair,
    mint: &Pubkey,
    owner: &Pubkey,
    amount: u64,
) -> anyhow::Result<Signature> {
    let (token_program, decimals) = mint_info(rpc, mint).await?;
    let ata = get_associated_token_address_with_program_id(owner, mint, &token_program);
    let instruction = mint_to_checked(
        &token_program,
        mint,
        &ata,
        &payer.pubkey(),
        &[],
        amount,
        decimals,
    )?;
    send(rpc, &[instruction], &[payer])
        .await
        .with_context(|| format!("minting {amount} of {mint} to {owner}'s account"))
}

/// The balance in base units of `mint` held by `owner` over all its token accounts of that
/// mint (0 when it has none), read with `getTokenAccountsByOwner` in jsonParsed.
pub async fn token_balance(rpc: &RpcClient, owner: &Pubkey, mint: &Pubkey) -> anyhow::Result<u64> {
    let accounts = rpc
        .get_token_accounts_by_owner(owner, TokenAccountsFilter::Mint(*mint))
        .await?;
    let mut total: u64 = 0;
    for keyed in accounts {
        let data = serde_json::to_value(&keyed.account.data)?;
        let amount = data
            .pointer("/parsed/info/tokenAmount/amount")
            .and_then(Value::as_str)
            .with_context(|| format!("token account {} is not jsonParsed: {data}", keyed.pubkey))?;
        total = total
            .checked_add(amount.parse()?)
            .context("token balance overflows u64")?;
    }
    Ok(total)
}

/// The token program owning `mint` and the mint's decimals.
async fn mint_info(rpc: &RpcClient, mint: &Pubkey) -> anyhow::Result<(Pubkey, u8)> {
    let account = rpc
        .get_account(mint)
        .await
        .with_context(|| format!("reading mint {mint}"))?;
    let state = StateWithExtensions::<Mint>::unpack(&account.data)
        .map_err(|e| anyhow::anyhow!("{mint} is not a mint: {e}"))?;
    if account.owner != spl_token_interface::ID && account.owner != spl_token_2022_interface::ID {
        bail!("{mint} is owned by {}, not a token program", account.owner);
    }
    Ok((account.owner, state.base.decimals))
}

/// Calls a test-control method of the node.
async fn control(rpc: &RpcClient, method: &'static str, params: Value) -> Result<(), ClientError> {
    rpc.send::<Value>(RpcRequest::Custom { method }, params)
        .await
        .map(|_| ())
}

/// The landed transaction `signature` as the node gives it, and its status.
pub async fn landed(
    rpc: &RpcClient,
    signature: &str,
) -> anyhow::Result<(
    solana_transaction::versioned::VersionedTransaction,
    Option<solana_transaction_status_client_types::UiTransactionStatusMeta>,
)> {
    let signature: Signature = signature.parse().context("a transaction signature")?;
    let landed = rpc
        .get_transaction(
            &signature,
            solana_transaction_status_client_types::UiTransactionEncoding::Base64,
        )
        .await?
        .transaction;
    let tx = landed
        .transaction
        .decode()
        .context("a transaction in base64")?;
    Ok((tx, landed.meta))
}

/// `litesvm_expireBlockhash`: every blockhash handed out so far becomes invalid.
pub async fn expire_blockhash(rpc: &RpcClient) -> anyhow::Result<()> {
    Ok(control(rpc, "litesvm_expireBlockhash", Value::Null).await?)
}

/// `litesvm_dropTransactions`: the next `count` sent transactions are accepted and lost.
pub async fn drop_transactions(rpc: &RpcClient, count: u64) -> anyhow::Result<()> {
    Ok(control(rpc, "litesvm_dropTransactions", json!([count])).await?)
}

/// `litesvm_faultSends`: the next `count` sent transactions (after those of earlier calls)
/// are answered with an error: `unhealthy` (the node does not take the transaction, and its
/// error says nothing of it), `refusal` (a preflight failure, after the transaction landed
/// all the same) or `rejected` (a preflight failure, the transaction not taken).
pub async fn fault_sends(rpc: &RpcClient, count: u64, kind: &str) -> anyhow::Result<()> {
    Ok(control(rpc, "litesvm_faultSends", json!([count, kind])).await?)
}

/// `litesvm_setRecentFees`: `getRecentPrioritizationFees` reports `fees`, one per recent
/// slot, oldest first.
pub async fn set_recent_fees(rpc: &RpcClient, fees: &[u64]) -> anyhow::Result<()> {
    Ok(control(rpc, "litesvm_setRecentFees", json!([fees])).await?)
}

/// `litesvm_setCongestion`: the node includes only sends priced at least `threshold`
/// micro-lamports a compute unit, reports recent prices around it, and loses
/// `drop_percent` of sends whatever their price.
pub async fn set_congestion(
    rpc: &RpcClient,
    threshold: u64,
    drop_percent: u64,
) -> anyhow::Result<()> {
    Ok(control(
        rpc,
        "litesvm_setCongestion",
        json!([threshold, drop_percent]),
    )
    .await?)
}
