//! Adds `key_changes`, one row whose `version` moves whenever an API key changes in a way
//! its holder's requests see (revoked, expired, limited, its scopes or secret), by a trigger
//! on `api_keys`, whoever made the change (a core, the CLI, an operator's SQL). On PostgreSQL
//! the trigger also notifies channel `walletops_keys`, which every core listens on; a SQLite
//! core reads the version instead. Either way a core drops the keys it holds in memory.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// The columns whose change a core must hear of (not `last_used_at`, written on use).
const WATCHED: &str =
    "revoked_at, expires_at, limited, scopes, secret_hash, prefix, user_id, lineage_id";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(
            "CREATE TABLE key_changes (id INTEGER PRIMARY KEY, version BIGINT NOT NULL)",
        )
        .await?;
        db.execute_unprepared("INSERT INTO key_changes (id, version) VALUES (1, 0)")
            .await?;
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                db.execute_unprepared(
                    "CREATE FUNCTION walletops_key_changed() RETURNS trigger AS $$
                     BEGIN
                         UPDATE key_changes SET version = version + 1 WHERE id = 1;
                         PERFORM pg_notify('walletops_keys', '');
                         RETURN NULL;
                     END $$ LANGUAGE plpgsql",
                )
                .await?;
                db.execute_unprepared(&format!(
                    "CREATE TRIGGER api_keys_changed AFTER UPDATE OF {WATCHED} OR DELETE ON api_keys
                     FOR EACH STATEMENT EXECUTE FUNCTION walletops_key_changed()"
                ))
                .await?;
            }
            _ => {
                for (name, event) in [
                    ("api_keys_updated", format!("UPDATE OF {WATCHED}")),
                    ("api_keys_deleted", "DELETE".to_owned()),
                ] {
                    db.execute_unprepared(&format!(
                        "CREATE TRIGGER {name} AFTER {event} ON api_keys
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
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                db.execute_unprepared("DROP TRIGGER api_keys_changed ON api_keys")
                    .await?;
                db.execute_unprepared("DROP FUNCTION walletops_key_changed()")
                    .await?;
            }
            _ => {
                db.execute_unprepared("DROP TRIGGER api_keys_updated")
                    .await?;
                db.execute_unprepared("DROP TRIGGER api_keys_deleted")
                    .await?;
            }
        }
        db.execute_unprepared("DROP TABLE key_changes").await?;
        Ok(())
    }
}
