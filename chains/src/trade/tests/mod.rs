//! The aggregator clients against a scripted local server that answers in the aggregators'
//! wire formats: request shapes, answer parsing, retries, timeouts and error mapping.

mod jupiter;
mod oneinch;

pub(crate) use crate::testing::{Reply, dead_url, policy, serve};

#[test]
fn routers_are_per_chain() {
    use super::config::{ONEINCH_V6_ROUTER, ONEINCH_V6_ROUTER_ZKSYNC, TradeConfig};
    let config = TradeConfig::default();
    assert!(config.evm_routers(1).contains(&ONEINCH_V6_ROUTER));
    let zksync = config.evm_routers(324);
    assert!(zksync.contains(&ONEINCH_V6_ROUTER_ZKSYNC) && !zksync.contains(&ONEINCH_V6_ROUTER));
}
