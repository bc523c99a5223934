//! The local admin commands: users (and their link to the wallet provider), their API keys
//! and wallets, and migrations. They act on
//! the configured database directly, not through a running core.

use walletops_core::{Config, Core, auth::KeyState, requests::limits};
use walletops_domain::{ApiKey, RuleKind, Scopes, Wallet};

use anyhow::Context;

use crate::cli::{GuardCommand, KeysCommand, KeystoreCommand, UsersCommand, WalletsCommand};

/// `migrate`: runs pending migrations on the store alone (migrating needs no master key).
pub(crate) async fn migrate(config: &Config) -> anyhow::Result<()> {
    walletops_store::Store::connect(&config.database_url()).await?;
    println!("migrations are up to date");
    Ok(())
}

/// `backup FILE`: a consistent copy of the SQLite database while cores write to it.
pub(crate) async fn backup(config: &Config, file: &std::path::Path) -> anyhow::Result<()> {
    let store = walletops_store::Store::connect(&config.database_url()).await?;
    store.backup_to(file).await?;
    println!(
        "Database copied to {} (readable by you only)",
        file.display()
    );
    println!("Keep the master key with it, apart: the backup's wallet keys open only under it.");
    Ok(())
}

/// `keystore rotate`: every wallet key re-sealed under a new master key, then the master key
/// file replaced (when the key comes from `data_dir/master.key`).
pub(crate) async fn keystore(config: Config, command: KeystoreCommand) -> anyhow::Result<()> {
    let KeystoreCommand::Rotate { new_key_file } = command;
    let text = zeroize::Zeroizing::new(
        std::fs::read_to_string(&new_key_file)
            .with_context(|| format!("reading {}", new_key_file.display()))?,
    );
    let new = walletops_core::signer::Keystore::from_master_key(text.trim())
        .with_context(|| format!("the new master key in {}", new_key_file.display()))?;
    let configured = config.master_key.is_some();
    let key_file = config.data_dir.join("master.key");
    let core = Core::open(config).await?;
    let count = core.wallets.rotate_keystore(&new).await?;
    println!("Re-sealed {count} wallet keys and the keystore check under the new master key.");
    if configured {
        println!(
            "Set master_key (WALLETOPS_MASTER_KEY) to the new key on every core and restart them."
        );
    } else {
        // Written beside, then renamed over: the file is never half-written.
        let staged = key_file.with_extension("key.new");
        let _ = std::fs::remove_file(&staged);
        let mut out = walletops_domain::files::create_private_file(&staged)?;
        std::io::Write::write_all(&mut out, format!("{}\n", text.trim()).as_bytes())?;
        out.sync_all()?;
        std::fs::rename(&staged, &key_file)?;
        println!(
            "{} now holds the new key; restart the cores that use it.",
            key_file.display()
        );
    }
    println!(
        "Until restarted, a core on the old key refuses to make wallets, and signs only for \
         wallets whose keys it read before, answering SERVICE_UNAVAILABLE for the others."
    );
    Ok(())
}

/// `users create`, `list`, `link`, `unlink`, `set-password` and `sign-in-link`.
pub(crate) async fn users(config: Config, command: UsersCommand) -> anyhow::Result<()> {
    let core = Core::open(config).await?;
    match command {
        UsersCommand::Create { name, no_wallets } => {
            let (user, _, secret) = core.users().create(&name, Scopes::ALL).await?;
            println!("User: {} ({})", user.name, user.id);
            println!("API key: {}", secret.expose());
            println!("(The key is shown only this once: store it now.)");
            if !no_wallets {
                for w in core.create_starter_wallets(user.id).await? {
                    println!("Wallet ({}, default, delegated): {}", w.family(), w.address);
                }
            }
        }
        UsersCommand::List => {
            for u in core.users().list().await? {
                println!(
                    "{}  {}  {}{}",
                    u.id,
                    u.created_at.to_rfc3339(),
                    u.name,
                    u.provider_user_id
                        .map(|id| format!("  linked to {id}"))
                        .unwrap_or_default()
                );
            }
        }
        UsersCommand::Link {
            user,
            provider_user,
        } => {
            let user = core.users().find(&user).await?;
            let report = core.wallets.link(&user, &provider_user).await?;
            println!("User {} linked to {provider_user}", user.name);
            print_sync(&user.name, report);
            for w in core.wallets.list(user.id, Default::default()).await? {
                print_wallet(&w);
            }
        }
        UsersCommand::Unlink { user } => {
            let user = core.users().find(&user).await?;
            core.wallets.unlink(&user).await?;
            println!("User {} unlinked from the wallet provider", user.name);
        }
        UsersCommand::SetPassword { user } => {
            let user = core.users().find(&user).await?;
            let password = read_password(&user.name)?;
            core.sessions.set_password(user.id, &password).await?;
            println!(
                "Dashboard password of {} set; its open sessions ended",
                user.name
            );
        }
        UsersCommand::SignInLink { user } => {
            let user = core.users().find(&user).await?;
            let (token, expires) = core.sessions.issue_link(user.id).await?;
            println!(
                "Sign-in link for {} (works once, until {}):",
                user.name,
                expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
            println!("{}", core.config.sign_in_link(token.expose()));
        }
    }
    Ok(())
}

/// `keys create`, `keys list` and `keys revoke`.
pub(crate) async fn keys(config: Config, command: KeysCommand) -> anyhow::Result<()> {
    let core = Core::open(config).await?;
    match command {
        KeysCommand::Create {
            user,
            name,
            expires,
            scopes,
        } => {
            let user = core.users().find(&user).await?;
            let (key, secret) = core
                .keys
                .create(user.id, &name, expires, scopes, None)
                .await?;
            print_key(&key);
            println!("API key: {}", secret.expose());
            println!("(The key is shown only this once: store it now.)");
        }
        KeysCommand::List { user } => {
            let user = core.users().find(&user).await?;
            for key in core.keys.list(user.id).await? {
                print_key(&key);
            }
        }
        KeysCommand::Limit {
            user,
            key,
            chain,
            asset,
            max_per_tx,
            daily,
            approve_above,
            fees_per_day,
            max_gas,
            remove,
        } => {
            let user = core.users().find(&user).await?;
            let chain = core.chains.resolve(&chain)?;
            let (asset, max_per_tx, daily) = match (fees_per_day, max_gas) {
                (Some(fees), _) => (walletops_domain::FEES_ASSET.to_owned(), None, Some(fees)),
                (_, Some(gas)) => (walletops_domain::GAS_ASSET.to_owned(), Some(gas), None),
                _ => (asset, max_per_tx, daily),
            };
            if remove {
                let named = limits::asset(chain, &asset)?;
                core.limits.remove(user.id, &key, chain, &named).await?;
                println!("Removed the limit on {asset} of {}.", chain.slug());
            } else {
                let given = limits::LimitText {
                    asset: &asset,
                    max_per_transaction: max_per_tx.as_deref(),
                    daily_budget: daily.as_deref(),
                    approval_above: approve_above.as_deref(),
                };
                core.limits
                    .set(user.id, &key, chain, limits::limit(chain, given)?)
                    .await?;
            }
            print_limits(&core, user.id, &key).await?;
        }
        KeysCommand::Allow {
            user,
            key,
            chain,
            recipient,
            contract,
            function,
            spender,
            token,
            remove,
        } => {
            let user = core.users().find(&user).await?;
            let chain = core.chains.resolve(&chain)?;
            let (kind, address) = match (recipient, contract, spender, token) {
                (Some(a), ..) => (RuleKind::Recipient, Some(a)),
                (_, Some(a), ..) => (RuleKind::Contract, Some(a)),
                (_, _, Some(a), _) => (RuleKind::Spender, Some(a)),
                (.., Some(a)) => (RuleKind::Token, Some(a)),
                _ => (RuleKind::Chain, None),
            };
            let given = limits::RuleText {
                kind,
                address: address.as_deref(),
                selector: function.as_deref(),
            };
            let allowed = limits::rule(chain, given)?;
            if remove {
                core.limits.disallow(user.id, &key, chain, allowed).await?;
                println!("Removed the rule.");
            } else {
                core.limits.allow(user.id, &key, chain, allowed).await?;
            }
            print_policy(&core, user.id, &key).await?;
        }
        KeysCommand::Unfreeze { user, key } => {
            let user = core.users().find(&user).await?;
            let key = core.limits.unfreeze(user.id, &key).await?;
            println!(
                "Unfroze the line of key {}: its keys write again.",
                key.prefix
            );
        }
        KeysCommand::Policy { user, key } => {
            let user = core.users().find(&user).await?;
            print_policy(&core, user.id, &key).await?;
        }
        KeysCommand::Limits { user, key } => {
            let user = core.users().find(&user).await?;
            print_limits(&core, user.id, &key).await?;
        }
        KeysCommand::Revoke { user, key } => {
            let user = core.users().find(&user).await?;
            let key = core.keys.revoke(user.id, &key, None).await?;
            print_key(&key);
        }
    }
    Ok(())
}

/// `wallets create`, `wallets list` and `wallets delegate`.
pub(crate) async fn wallets(config: Config, command: WalletsCommand) -> anyhow::Result<()> {
    let core = Core::open(config).await?;
    match command {
        WalletsCommand::Create {
            user,
            chain_type,
            make_default,
            custody,
        } => {
            let user = core.users().find(&user).await?;
            print_wallet(
                &core
                    .wallets
                    .create(user.id, chain_type, make_default, custody)
                    .await?,
            );
        }
        WalletsCommand::List { user } => {
            let user = core.users().find(&user).await?;
            for w in core.wallets.list(user.id, Default::default()).await? {
                print_wallet(&w);
            }
        }
        WalletsCommand::Sync { user: Some(user) } => {
            let user = core.users().find(&user).await?;
            print_sync(&user.name, core.wallets.sync(&user).await?);
        }
        WalletsCommand::Sync { user: None } => {
            let (synced, failed) = core.wallets.sync_all().await?;
            println!("{synced} linked users synced");
            for (user, err) in &failed {
                eprintln!("{user}: {err}");
            }
            anyhow::ensure!(
                failed.is_empty(),
                "{} users could not be synced",
                failed.len()
            );
        }
        WalletsCommand::Audit => crate::hsm::audit(&core).await?,
        WalletsCommand::Guard { command } => guard(&core, command).await?,
        WalletsCommand::Delegate { address, state } => {
            print_wallet(
                &core
                    .wallets
                    .update(
                        &walletops_core::requests::any_address(&address, "address")?,
                        None,
                        Some(state == "on"),
                    )
                    .await?,
            );
        }
    }
    Ok(())
}

/// `wallets guard enable|disable ADDRESS --chain C`.
async fn guard(core: &Core, command: GuardCommand) -> anyhow::Result<()> {
    let (address, chain, on) = match &command {
        GuardCommand::Enable { address, chain } => (address, chain, true),
        GuardCommand::Disable { address, chain } => (address, chain, false),
    };
    let chain = core.chains.resolve(chain)?;
    let address = chain.family().parse_address(address).map_err(|e| {
        anyhow::anyhow!("address: {e} (a guard is kept for an EVM wallet on an EVM chain)")
    })?;
    let owner = core
        .store
        .find_wallet(&address)
        .await?
        .with_context(|| format!("no wallet {address}"))?;
    let wallet = core
        .wallets
        .resolve_delegated(owner.user_id, chain.family(), Some(&address), "address")
        .await?;
    let change = if on {
        core.guards.enable(chain, &wallet).await?
    } else {
        core.guards.disable(chain, &wallet).await?
    };
    if on {
        println!(
            "Wallet {address} on {} now delegates to the guard {}{} (transaction {:#x}).",
            chain.slug(),
            change.delegate.to_checksum(None),
            if change.deployed {
                ", deployed by it"
            } else {
                ""
            },
            change.hash
        );
        println!("Writes of its limited keys run through the guard's checks from now on.");
    } else {
        println!(
            "Wallet {address} on {} no longer delegates to the guard (transaction {:#x}); its code is empty again.",
            chain.slug(),
            change.hash
        );
    }
    Ok(())
}

/// Prints the policy of `user`'s key `key`, one rule a line.
async fn print_policy(core: &Core, user: uuid::Uuid, key: &str) -> anyhow::Result<()> {
    let key = core.limits.owned(user, key).await?;
    let rules = core.limits.rules_of(key.id).await?;
    if rules.is_empty() {
        println!("Key {} has no policy rules.", key.prefix);
    }
    for rule in rules {
        println!("{} allows {rule}", key.prefix);
    }
    Ok(())
}

/// Prints the spend limits of `user`'s key `key`, with what is spent and left.
async fn print_limits(core: &Core, user: uuid::Uuid, key: &str) -> anyhow::Result<()> {
    let (key, limits) = core.limits.of_owned_key(user, key).await?;
    if limits.is_empty() {
        println!("Key {} has no spend limits.", key.prefix);
    }
    let or_none =
        |v: Option<alloy::primitives::U256>| v.map_or_else(|| "none".to_owned(), |v| v.to_string());
    for s in limits {
        println!(
            "{} {} {}: at most {} per write; 24-hour budget {}, spent {}, left {}; approval above {}",
            key.prefix,
            s.limit.chain,
            s.limit.asset,
            or_none(s.limit.max_per_transaction),
            or_none(s.limit.daily_budget),
            s.spent_24h,
            or_none(s.left()),
            or_none(s.limit.approval_above),
        );
    }
    Ok(())
}

fn print_key(key: &ApiKey) {
    let now = chrono::Utc::now();
    let state = match key.state(now) {
        KeyState::Active => "active",
        KeyState::ExpiringSoon => "expiring soon",
        KeyState::Expired => "expired",
        KeyState::Revoked => "revoked",
    };
    let expires = key
        .expires_at
        .map_or_else(|| "never".to_owned(), |t| t.to_rfc3339());
    let maker = key
        .created_by
        .map_or_else(String::new, |id| format!("  (made with key {id})"));
    println!(
        "{}  {}  {:<14} {:<16} expires {}  {}{maker}",
        key.id, key.prefix, state, key.scopes, expires, key.name
    );
}

/// A password from the terminal's prompt, or the first line of stdin when it is not a
/// terminal (scripts pipe it in).
fn read_password(user: &str) -> anyhow::Result<zeroize::Zeroizing<String>> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        let first = zeroize::Zeroizing::new(rpassword::prompt_password(format!(
            "New dashboard password for {user}: "
        ))?);
        let again = zeroize::Zeroizing::new(rpassword::prompt_password("Again: ")?);
        anyhow::ensure!(*first == *again, "the two passwords differ");
        return Ok(first);
    }
    let mut line = zeroize::Zeroizing::new(String::new());
    std::io::stdin().read_line(&mut line)?;
    let trimmed = line.trim_end_matches(['\r', '\n']).to_owned();
    Ok(zeroize::Zeroizing::new(trimmed))
}

fn print_wallet(w: &Wallet) {
    let note = if w.removed_at.is_some() {
        "  removed at the provider".to_owned()
    } else if w.in_hsm() {
        // The key's label in the HSM, which `pkcs11-tool` lists.
        format!("  key {}", w.key_label())
    } else {
        String::new()
    };
    println!(
        "{}  {:<8}  default={}  delegated={}  {}/{}{note}",
        w.address,
        w.family(),
        w.is_default,
        w.automation_enabled,
        w.provider_type,
        w.client_type,
    );
}

fn print_sync(user: &str, report: walletops_domain::SyncReport) {
    println!(
        "Synced {user}: {} added, {} updated, {} removed{}",
        report.added,
        report.updated,
        report.removed,
        if report.conflicts > 0 {
            format!(", {} held by another user (left alone)", report.conflicts)
        } else {
            String::new()
        }
    );
}
