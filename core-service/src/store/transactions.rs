use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::{Store, entities::transactions};
use crate::{error::Result, transactions::TransactionRecord};

impl Store {
    /// The transaction `id` if `user_id` owns it. Another user's transaction is reported
    /// exactly like a missing one, so ids cannot be probed.
    pub(crate) async fn find_transaction(
        &self,
        user_id: Uuid,
        id: Uuid,
    ) -> Result<Option<TransactionRecord>> {
        transactions::Entity::find_by_id(id)
            .filter(transactions::Column::UserId.eq(user_id))
            .one(self.db())
            .await?
            .map(TransactionRecord::try_from)
            .transpose()
    }
}
