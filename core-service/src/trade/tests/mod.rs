//! The aggregator clients against a scripted local server that answers in the aggregators'
//! wire formats: request shapes, answer parsing, retries, timeouts and error mapping.

mod jupiter;
mod oneinch;

pub(crate) use crate::testing::{Reply, dead_url, policy, serve};
