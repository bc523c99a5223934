//! Webhooks: signed deliveries of transaction events to the endpoints users register,
//! following the Standard Webhooks convention. This room holds the rules a delivery is
//! made under: how it is signed (`signing`) and which URLs may receive one (`targets`).

pub mod signing;
pub mod targets;
