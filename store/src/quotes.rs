//! The quotes the service gave (`POST /trade/quote`), kept so that a swap naming one is held
//! to its price on any core. A quote is kept a day past its expiry (an approval-held swap
//! is judged after its expiry), then purged when a new one is stored.

use chrono::{DateTime, Duration, Utc};
use sea_orm::{ActiveModelTrait, ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::{Store, entities::quotes};
use crate::error::Result;

/// How long past its expiry a quote is kept.
const KEPT: Duration = Duration::days(1);

/// A quote as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuoteRecord {
    /// Its id, the `quoteId` a swap names.
    pub id: Uuid,
    /// The user it was given to.
    pub user_id: Uuid,
    /// The API key that asked; `None` for a dashboard session.
    pub key_id: Option<Uuid>,
    /// The chain's slug.
    pub chain: String,
    /// The tokens sold and bought, as the quote resolved them.
    pub from_token: String,
    /// See `from_token`.
    pub to_token: String,
    /// The amount sold, base units, decimal.
    pub amount: String,
    /// The amount quoted to come in, base units, decimal.
    pub dst_amount: String,
    /// Until when a swap may name it.
    pub expires_at: DateTime<Utc>,
}

impl From<quotes::Model> for QuoteRecord {
    fn from(m: quotes::Model) -> Self {
        Self {
            id: m.id,
            user_id: m.user_id,
            key_id: m.key_id,
            chain: m.chain,
            from_token: m.from_token,
            to_token: m.to_token,
            amount: m.amount,
            dst_amount: m.dst_amount,
            expires_at: m.expires_at,
        }
    }
}

impl Store {
    /// Keeps `quote`, given at `now`, and purges those a day past their expiry.
    pub async fn insert_quote(&self, quote: &QuoteRecord, now: DateTime<Utc>) -> Result<()> {
        quotes::Entity::delete_many()
            .filter(quotes::Column::ExpiresAt.lt(now - KEPT))
            .exec(self.sea())
            .await?;
        quotes::ActiveModel {
            id: Set(quote.id),
            user_id: Set(quote.user_id),
            key_id: Set(quote.key_id),
            chain: Set(quote.chain.clone()),
            from_token: Set(quote.from_token.clone()),
            to_token: Set(quote.to_token.clone()),
            amount: Set(quote.amount.clone()),
            dst_amount: Set(quote.dst_amount.clone()),
            created_at: Set(now),
            expires_at: Set(quote.expires_at),
        }
        .insert(self.sea())
        .await?;
        Ok(())
    }

    /// The quote `id` given to `user_id`, if there is one.
    pub async fn quote(&self, user_id: Uuid, id: Uuid) -> Result<Option<QuoteRecord>> {
        Ok(quotes::Entity::find_by_id(id)
            .filter(quotes::Column::UserId.eq(user_id))
            .one(self.sea())
            .await?
            .map(Into::into))
    }
}
