//! Moves `key_changes.version` (and, on PostgreSQL, notifies `walletops_keys`) whenever a
//! wallet is added, removed, or changes in a way a read sees (its owner, address, default,
//! removal), by triggers on `wallets`, whoever made the change: cores hold wallets in memory
//! for reads beside the keys, and drop both on the same signal.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// An update a core must hear of: a provider sync rewrites every row it lists, mostly with
/// the values it had, which must not drop the cores' keys each time.
const CHANGED: &str = "OLD.user_id IS NOT NEW.user_id OR OLD.chain_type IS NOT NEW.chain_type
     OR OLD.address IS NOT NEW.address OR OLD.is_default IS NOT NEW.is_default
     OR OLD.removed_at IS NOT NEW.removed_at";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                // The function of the keys' trigger (migration 28) serves.
                let changed = CHANGED.replace("IS NOT", "IS DISTINCT FROM");
                for (name, event, when) in [
                    ("wallets_added", "INSERT", String::new()),
                    ("wallets_updated", "UPDATE", format!("WHEN ({changed})")),
                    ("wallets_deleted", "DELETE", String::new()),
                ] {
                    db.execute_unprepared(&format!(
                        "CREATE TRIGGER {name} AFTER {event} ON wallets FOR EACH ROW {when}
                         EXECUTE FUNCTION walletops_key_changed()"
                    ))
                    .await?;
                }
            }
            _ => {
                for (name, event, when) in [
                    ("wallets_added", "INSERT", String::new()),
                    ("wallets_updated", "UPDATE", format!("WHEN {CHANGED}")),
                    ("wallets_deleted", "DELETE", String::new()),
                ] {
                    db.execute_unprepared(&format!(
                        "CREATE TRIGGER {name} AFTER {event} ON wallets {when}
                         BEGIN UPDATE key_changes SET version = version + 1 WHERE id = 1; END"
                    ))
                    .await?;
                }
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for name in ["wallets_added", "wallets_updated", "wallets_deleted"] {
            let drop = match manager.get_database_backend() {
                DbBackend::Postgres => format!("DROP TRIGGER {name} ON wallets"),
                _ => format!("DROP TRIGGER {name}"),
            };
            db.execute_unprepared(&drop).await?;
        }
        Ok(())
    }
}
