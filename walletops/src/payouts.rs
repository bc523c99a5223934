//! `payouts`: many recipients paid from one wallet, from a CSV file, on the configured
//! database. A running core pays each item once (within a second of the payout's storing).

use anyhow::Context as _;
use walletops_core::{Config, Core, error::WalletOpsError};
use walletops_domain::{ItemStanding, Payout};
use walletops_proto::{payouts_csv, v1 as pb};

use crate::cli::PayoutsCommand;

/// `payouts create|list|show`.
pub(crate) async fn payouts(config: Config, command: PayoutsCommand) -> anyhow::Result<()> {
    let core = Core::open(config).await?;
    match command {
        PayoutsCommand::Create {
            user,
            chain,
            csv,
            from,
            idempotency_key,
            check,
        } => {
            let user = core.users().find(&user).await?;
            let text = std::fs::read_to_string(&csv)
                .with_context(|| format!("reading {}", csv.display()))?;
            let items = payouts_csv::parse(&text).map_err(|errors| {
                let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
                anyhow::anyhow!(
                    "{} is not a payout file:\n  {}",
                    csv.display(),
                    lines.join("\n  ")
                )
            })?;
            // The same user, chain, wallet and file: the same key, so a second run pays nothing.
            let key = idempotency_key.unwrap_or_else(|| {
                let name = format!(
                    "{}/{chain}/{}/{text}",
                    user.id,
                    from.as_deref().unwrap_or("")
                );
                uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes())
            });
            let req = pb::CreatePayoutRequest {
                chain,
                from,
                items,
                validate_only: check,
            };
            let payout = core
                .create_owner_payout(user.id, (!check).then_some(key), req)
                .await
                .map_err(rows_named)?;
            let rent = payout
                .rent
                .filter(|r| *r > 0)
                .map(|r| {
                    format!(" It pays {r} lamports of rent for recipients' new token accounts.")
                })
                .unwrap_or_default();
            if check {
                println!(
                    "Checked: {} items from {} on {}; nothing stored.{rent}",
                    payout.items.len(),
                    payout.from,
                    payout.chain
                );
            } else {
                println!(
                    "Payout {} ({} items from {} on {}, idempotency key {key}): a running core pays each item once.",
                    payout.id,
                    payout.items.len(),
                    payout.from,
                    payout.chain
                );
            }
        }
        PayoutsCommand::List { user } => {
            let user = core.users().find(&user).await?;
            let payouts = core
                .store
                .list_payouts(user.id, &walletops_store::PayoutFilter::default(), 100)
                .await?;
            if payouts.is_empty() {
                println!("No payouts.");
            }
            let standings = core.payout_standings(&payouts).await?;
            for (p, s) in payouts.iter().zip(&standings) {
                println!("{}", headline(p, s));
            }
        }
        PayoutsCommand::Show { user, id } => {
            let user = core.users().find(&user).await?;
            let payout: Payout = core
                .store
                .get_payout(user.id, id)
                .await?
                .with_context(|| format!("no payout {id} of {}", user.name))?;
            let standings = core
                .payout_standings(std::slice::from_ref(&payout))
                .await?
                .pop()
                .unwrap_or_default();
            println!("{}", headline(&payout, &standings));
            for (item, s) in payout.items.iter().zip(&standings) {
                println!(
                    "  {:>4} {:<16} {} {} {} to {}{}",
                    item.index,
                    s.state,
                    item.transfer.amount(),
                    item.transfer.asset_name(),
                    item.transfer
                        .token()
                        .map(|t| t.to_string())
                        .unwrap_or_default(),
                    item.transfer.to(),
                    s.hash
                        .as_deref()
                        .or(s.error.as_deref())
                        .map(|h| format!("  {h}"))
                        .unwrap_or_default()
                );
            }
        }
    }
    Ok(())
}

/// A payout in a line: id, state, items, chain, wallet, and how many items are in each
/// state.
fn headline(p: &Payout, standings: &[ItemStanding]) -> String {
    format!(
        "{}  {:<9} {} items on {} from {}  {}",
        p.id,
        p.state.as_str(),
        p.items.len(),
        p.chain,
        p.from,
        totals(standings)
    )
}

/// How many items are in each state (`CONFIRMED 3, QUEUED 2`).
fn totals(standings: &[ItemStanding]) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for s in standings {
        *counts.entry(s.state.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(state, n)| format!("{state} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A refusal of the payout, each bad item's field also named by its file row
/// (`(row 4) items[2].to: …`).
fn rows_named(e: WalletOpsError) -> anyhow::Error {
    let WalletOpsError::InvalidInput(violations) = e else {
        return e.into();
    };
    let lines: Vec<String> = violations
        .iter()
        .map(|v| match payouts_csv::row_of_field(&v.field) {
            Some((row, _)) => format!("(row {row}) {}: {}", v.field, v.description),
            None => format!("{}: {}", v.field, v.description),
        })
        .collect();
    anyhow::anyhow!("invalid input:\n  {}", lines.join("\n  "))
}
