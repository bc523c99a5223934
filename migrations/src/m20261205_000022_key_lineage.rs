//! Adds `api_keys.lineage_id`: the first key of the line a key was made in through
//! `ApiKeyService` (its maker's, its maker's maker's, up to a key the owner made), NULL for
//! a key the owner made, which begins its own line. A line shares one daily budget per
//! limit, so keys made with keys cannot multiply what their maker may move. Keys made with
//! keys before this are given their line, and what their makers are held to: spend limits,
//! policy rules and the limited mark, makers first.

use std::collections::HashMap;

use sea_orm_migration::{
    prelude::*,
    schema::*,
    sea_orm::{ConnectionTrait, prelude::Uuid},
};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    CreatedBy,
    Limited,
    LineageId,
}

#[derive(DeriveIden, Clone, Copy)]
enum SpendLimits {
    Table,
    KeyId,
    Chain,
    Asset,
    MaxPerTransaction,
    DailyBudget,
    ApprovalAbove,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden, Clone, Copy)]
enum KeyPolicyRules {
    Table,
    KeyId,
    Chain,
    Rule,
    Target,
    Selector,
    CreatedAt,
}

const BY_LINEAGE: &str = "idx_api_keys_lineage";

/// Every key's maker, `None` for a key the owner made.
async fn makers(manager: &SchemaManager<'_>) -> Result<HashMap<Uuid, Option<Uuid>>, DbErr> {
    let select = Query::select()
        .columns([ApiKeys::Id, ApiKeys::CreatedBy])
        .from(ApiKeys::Table)
        .to_owned();
    let db = manager.get_connection();
    let mut makers = HashMap::new();
    for row in db.query_all(&select).await? {
        let id: Uuid = row.try_get("", "id")?;
        makers.insert(id, row.try_get::<Option<Uuid>>("", "created_by")?);
    }
    Ok(makers)
}

/// Key `id`'s makers, nearest first (a maker missing, or a loop, ends the walk).
fn ancestry(makers: &HashMap<Uuid, Option<Uuid>>, id: Uuid) -> Vec<Uuid> {
    let mut up = Vec::new();
    let mut at = makers.get(&id).copied().flatten();
    while let Some(maker) = at {
        if maker == id || up.contains(&maker) || !makers.contains_key(&maker) {
            break;
        }
        up.push(maker);
        at = makers.get(&maker).copied().flatten();
    }
    up
}

/// Gives key `child` what `maker` is held to, where it has no such row yet.
async fn inherit(manager: &SchemaManager<'_>, child: Uuid, maker: Uuid) -> Result<(), DbErr> {
    let limits = [
        SpendLimits::Chain,
        SpendLimits::Asset,
        SpendLimits::MaxPerTransaction,
        SpendLimits::DailyBudget,
        SpendLimits::ApprovalAbove,
        SpendLimits::CreatedAt,
        SpendLimits::UpdatedAt,
    ];
    let from = Query::select()
        .expr(Expr::val(child))
        .columns(limits)
        .from(SpendLimits::Table)
        .and_where(Expr::col(SpendLimits::KeyId).eq(maker))
        .to_owned();
    let copy = Query::insert()
        .into_table(SpendLimits::Table)
        .columns(std::iter::once(SpendLimits::KeyId).chain(limits))
        .select_from(from)
        .map_err(|e| DbErr::Migration(e.to_string()))?
        .on_conflict(
            OnConflict::columns([SpendLimits::KeyId, SpendLimits::Chain, SpendLimits::Asset])
                .do_nothing()
                .to_owned(),
        )
        .to_owned();
    manager.exec_stmt(copy).await?;
    let rules = [
        KeyPolicyRules::Chain,
        KeyPolicyRules::Rule,
        KeyPolicyRules::Target,
        KeyPolicyRules::Selector,
        KeyPolicyRules::CreatedAt,
    ];
    let from = Query::select()
        .expr(Expr::val(child))
        .columns(rules)
        .from(KeyPolicyRules::Table)
        .and_where(Expr::col(KeyPolicyRules::KeyId).eq(maker))
        .to_owned();
    let copy = Query::insert()
        .into_table(KeyPolicyRules::Table)
        .columns(std::iter::once(KeyPolicyRules::KeyId).chain(rules))
        .select_from(from)
        .map_err(|e| DbErr::Migration(e.to_string()))?
        .on_conflict(
            OnConflict::columns([
                KeyPolicyRules::KeyId,
                KeyPolicyRules::Chain,
                KeyPolicyRules::Rule,
                KeyPolicyRules::Target,
                KeyPolicyRules::Selector,
            ])
            .do_nothing()
            .to_owned(),
        )
        .to_owned();
    manager.exec_stmt(copy).await?;
    let limited = Query::select()
        .column(ApiKeys::Id)
        .from(ApiKeys::Table)
        .and_where(Expr::col(ApiKeys::Id).eq(maker))
        .and_where(Expr::col(ApiKeys::Limited).eq(true))
        .to_owned();
    let mark = Query::update()
        .table(ApiKeys::Table)
        .value(ApiKeys::Limited, true)
        .and_where(Expr::col(ApiKeys::Id).eq(child))
        .and_where(Expr::exists(limited))
        .to_owned();
    manager.exec_stmt(mark).await
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(uuid_null(ApiKeys::LineageId))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_LINEAGE)
                    .table(ApiKeys::Table)
                    .col(ApiKeys::LineageId)
                    .to_owned(),
            )
            .await?;
        let makers = makers(manager).await?;
        let mut made: Vec<(Vec<Uuid>, Uuid)> = makers
            .keys()
            .map(|&id| (ancestry(&makers, id), id))
            .filter(|(up, _)| !up.is_empty())
            .collect();
        // Makers before the keys they made: a key inherits what its maker was given.
        made.sort_by_key(|(up, _)| up.len());
        for (up, id) in made {
            let first = *up.last().unwrap_or(&id);
            let line = Query::update()
                .table(ApiKeys::Table)
                .value(ApiKeys::LineageId, first)
                .and_where(Expr::col(ApiKeys::Id).eq(id))
                .to_owned();
            manager.exec_stmt(line).await?;
            inherit(manager, id, up[0]).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(BY_LINEAGE)
                    .table(ApiKeys::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .drop_column(ApiKeys::LineageId)
                    .to_owned(),
            )
            .await
    }
}
