//! The dashboard's schema: adds `api_keys.scopes` and `users.password_hash`, and creates
//! `dashboard_sessions` and `sign_in_links`, both storing only the SHA-256 of their tokens.

use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261123_000001_create_users::Users;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    /// What the key may do: a comma-separated subset of `read`, `trade`, `write`. Keys made
    /// before scopes existed keep all three.
    Scopes,
}

#[derive(DeriveIden)]
enum UserColumns {
    /// The user's dashboard password as an argon2id PHC string; NULL: none set yet.
    PasswordHash,
}

#[derive(DeriveIden)]
enum DashboardSessions {
    Table,
    Id,
    UserId,
    /// Hex SHA-256 of the session cookie's value: the value itself is never stored.
    TokenHash,
    CreatedAt,
    /// Last request of the session (to a minute): the idle timeout counts from here.
    LastSeenAt,
    /// The absolute end, however busy the session.
    ExpiresAt,
    /// Signed out (or ended by a password change).
    EndedAt,
}

#[derive(DeriveIden)]
enum SignInLinks {
    Table,
    Id,
    UserId,
    /// Hex SHA-256 of the link's token.
    TokenHash,
    CreatedAt,
    ExpiresAt,
    /// Used: a link works once.
    UsedAt,
}

const SESSIONS_USER: &str = "idx_dashboard_sessions_user";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(string_len(ApiKeys::Scopes, 64).default("read,trade,write"))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Users::Table)
                    .add_column(text_null(UserColumns::PasswordHash))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(DashboardSessions::Table)
                    .if_not_exists()
                    .col(pk_uuid(DashboardSessions::Id))
                    .col(uuid(DashboardSessions::UserId))
                    .col(string_len_uniq(DashboardSessions::TokenHash, 64))
                    .col(timestamp_with_time_zone(DashboardSessions::CreatedAt))
                    .col(timestamp_with_time_zone(DashboardSessions::LastSeenAt))
                    .col(timestamp_with_time_zone(DashboardSessions::ExpiresAt))
                    .col(timestamp_with_time_zone_null(DashboardSessions::EndedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(DashboardSessions::Table, DashboardSessions::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(SESSIONS_USER)
                    .table(DashboardSessions::Table)
                    .col(DashboardSessions::UserId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SignInLinks::Table)
                    .if_not_exists()
                    .col(pk_uuid(SignInLinks::Id))
                    .col(uuid(SignInLinks::UserId))
                    .col(string_len_uniq(SignInLinks::TokenHash, 64))
                    .col(timestamp_with_time_zone(SignInLinks::CreatedAt))
                    .col(timestamp_with_time_zone(SignInLinks::ExpiresAt))
                    .col(timestamp_with_time_zone_null(SignInLinks::UsedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(SignInLinks::Table, SignInLinks::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(SignInLinks::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(DashboardSessions::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Users::Table)
                    .drop_column(UserColumns::PasswordHash)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .drop_column(ApiKeys::Scopes)
                    .to_owned(),
            )
            .await
    }
}
