//! SPL Token and Token-2022: mints, associated token accounts, checked transfers, and their
//! parsed accounts.

use anyhow::{Context as _, bail};
use solana_account_decoder::{UiAccountData, UiAccountEncoding};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client_api::{config::RpcAccountInfoConfig, request::TokenAccountsFilter};
use solana_signer::Signer;
use spl_associated_token_account_interface::{
    address::get_associated_token_address_with_program_id,
    instruction::create_associated_token_account_idempotent,
};
use spl_token_2022_interface::instruction::transfer_checked;
use walletops_tests::solana_node::{create_mint, mint_to, token_balance};

use super::{LAMPORTS_PER_SOL, funded, signed, start};

#[tokio::test]
async fn token_and_token_2022_mints_transfer_checked() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let payer = funded(&rpc, 10 * LAMPORTS_PER_SOL).await?;
    let owner = Keypair::new();
    let recipient = Pubkey::new_unique();

    for (program, decimals) in [
        (spl_token_interface::ID, 6u8),
        (spl_token_2022_interface::ID, 9u8),
    ] {
        let mint = create_mint(&rpc, &payer, &program, decimals).await?;
        mint_to(&rpc, &payer, &mint, &owner.pubkey(), 1_000_000).await?;
        // Minting again reuses the associated token account.
        mint_to(&rpc, &payer, &mint, &owner.pubkey(), 500).await?;

        let accounts = rpc
            .get_token_accounts_by_owner(&owner.pubkey(), TokenAccountsFilter::ProgramId(program))
            .await?;
        assert_eq!(
            accounts.len(),
            1,
            "only the {program} account: {accounts:?}"
        );
        let ata = get_associated_token_address_with_program_id(&owner.pubkey(), &mint, &program);
        assert_eq!(accounts[0].pubkey, ata.to_string());
        assert_eq!(accounts[0].account.owner, program.to_string());
        let UiAccountData::Json(parsed) = &accounts[0].account.data else {
            bail!("jsonParsed data expected: {:?}", accounts[0].account.data);
        };
        let info = &parsed.parsed["info"];
        assert_eq!(parsed.parsed["type"], "account");
        assert_eq!(info["tokenAmount"]["amount"], "1000500");
        assert_eq!(info["tokenAmount"]["decimals"], decimals);
        assert_eq!(info["mint"], mint.to_string());
        assert_eq!(info["owner"], owner.pubkey().to_string());
        assert_eq!(
            parsed.space,
            165 + u64::from(program == spl_token_2022_interface::ID) * 5
        );

        // The recipient's associated token account is created in the transfer itself.
        let recipient_ata =
            get_associated_token_address_with_program_id(&recipient, &mint, &program);
        let tx = signed(
            &rpc,
            &[
                create_associated_token_account_idempotent(
                    &payer.pubkey(),
                    &recipient,
                    &mint,
                    &program,
                ),
                transfer_checked(
                    &program,
                    &ata,
                    &mint,
                    &recipient_ata,
                    &owner.pubkey(),
                    &[],
                    250_000,
                    decimals,
                )?,
            ],
            &[&payer, &owner],
        )
        .await?;
        rpc.send_and_confirm_transaction(&tx).await?;

        assert_eq!(token_balance(&rpc, &owner.pubkey(), &mint).await?, 750_500);
        assert_eq!(token_balance(&rpc, &recipient, &mint).await?, 250_000);
        let balance = rpc.get_token_account_balance(&recipient_ata).await?;
        assert_eq!(balance.amount, "250000");
        assert_eq!(balance.decimals, decimals);

        // Mints and token accounts parse in getAccountInfo too.
        let mint_account = rpc
            .get_ui_account_with_config(
                &mint,
                RpcAccountInfoConfig {
                    encoding: Some(UiAccountEncoding::JsonParsed),
                    ..RpcAccountInfoConfig::default()
                },
            )
            .await?
            .value
            .context("mint exists")?;
        let UiAccountData::Json(parsed_mint) = &mint_account.data else {
            bail!("jsonParsed mint expected: {:?}", mint_account.data);
        };
        assert_eq!(parsed_mint.parsed["type"], "mint");
        assert_eq!(parsed_mint.parsed["info"]["decimals"], decimals);
        assert_eq!(parsed_mint.parsed["info"]["supply"], "1000500");
        let raw = rpc.get_account(&recipient_ata).await?;
        assert_eq!(raw.owner, program);
        let base64 = rpc
            .get_ui_account_with_config(
                &recipient_ata,
                RpcAccountInfoConfig {
                    encoding: Some(UiAccountEncoding::Base64),
                    ..RpcAccountInfoConfig::default()
                },
            )
            .await?
            .value
            .context("token account exists")?;
        assert!(
            matches!(
                &base64.data,
                UiAccountData::Binary(_, UiAccountEncoding::Base64)
            ),
            "{:?}",
            base64.data
        );
        assert_eq!(base64.data.decode(), Some(raw.data));
    }

    // Mint filters keep the two programs' accounts apart.
    let all = rpc
        .get_token_accounts_by_owner(
            &recipient,
            TokenAccountsFilter::ProgramId(spl_token_2022_interface::ID),
        )
        .await?;
    assert_eq!(all.len(), 1);
    Ok(())
}
