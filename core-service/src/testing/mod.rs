//! Test-only support, compiled for the unit tests alone: a scripted local server for the
//! clients of external APIs (`scripted`), and the tests of a record's life across the store,
//! the idempotency claims and the broadcast log (`record_lifecycle`), with the helpers other
//! modules' tests use to make open records.

pub(crate) mod record_lifecycle;
pub(crate) mod scripted;
