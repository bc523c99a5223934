//! What an EVM write will do, foreseen before it is signed: its simulation as signed, read
//! into effects; for a limited key the wallet's state read around it decides beside the
//! events (`effects::evm::reconcile`), and what the service encoded itself is a floor.

use alloy::primitives::{Address, Bytes};
use walletops_domain::{Asset, TxKind, WalletAddress};

use super::EvmIntent;
use crate::error::Result;
use walletops_chains::{
    Chain,
    effects::{
        Foreseen,
        evm::{Declared, at_least, effects_of, reconcile, unexplained},
    },
    evm::{EvmClient, Signing, Simulation, Watch},
};

impl EvmIntent {
    /// What it says it moves or grants, when the service encoded it (a send, an
    /// approval): a floor of its effects.
    fn declared(&self) -> Option<Declared> {
        let amount = self.amount?;
        match (self.kind, self.token) {
            (TxKind::Send, None) => Some(Declared::Send {
                asset: Asset::Native,
                to: self.to,
                amount,
            }),
            (TxKind::Send, Some(token)) => Some(Declared::Send {
                asset: Asset::Token(WalletAddress::Evm(token)),
                to: self.beneficiary?,
                amount,
            }),
            (TxKind::Approve, Some(token)) => Some(Declared::Allowance {
                token,
                spender: self.beneficiary?,
                amount,
            }),
            _ => None,
        }
    }
}

/// What the simulation of a write foresaw.
#[derive(Debug)]
pub(super) struct Foresight {
    /// What the call returned (a token's `false`, say).
    pub(super) output: Bytes,
    /// Its effects, or why they are unknown.
    pub(super) effects: Foreseen,
    /// Whether the wallet held, before it, an allowance for the contract it calls on a
    /// watched token.
    pub(super) holds_allowance: bool,
    /// Why a limited key's contract call changes state no effect speaks for, if it does.
    pub(super) unexplained: Option<String>,
}

/// Simulates `signing`, the transaction of `intent` on `chain`, reading the coin and the
/// tokens of `watch` around it (a limited key's), and for a contract call the allowance the
/// called contract holds on each.
pub(super) async fn foresee(
    client: &EvmClient,
    chain: &Chain,
    signing: Signing<'_>,
    intent: &EvmIntent,
    watch: Option<&[Address]>,
) -> Result<Foresight> {
    let call = intent.kind == TxKind::ContractCall;
    let watch = watch.map(|tokens| Watch {
        tokens: tokens.to_vec(),
        allowances: match call {
            true => tokens.iter().map(|t| (*t, intent.to)).collect(),
            false => Vec::new(),
        },
    });
    let from = signing.from;
    match client.simulate(signing, watch.as_ref()).await? {
        Simulation::Ran {
            output,
            logs,
            reads,
        } => {
            let mut effects = effects_of(from, &logs);
            let mut holds_allowance = false;
            match (&reads, &watch) {
                (Some(reads), _) => {
                    holds_allowance = call
                        && reads
                            .allowances
                            .iter()
                            .any(|(_, spender, c)| *spender == intent.to && !c.before.is_zero());
                    reconcile(&mut effects, intent.to, reads);
                }
                // A node that traces but cannot run the reads in its simulation: what the
                // contract may take is read apart, on the latest block.
                (None, Some(watch)) if call => {
                    for (token, spender) in &watch.allowances {
                        let held = client.allowance(*token, from, *spender).await?;
                        holds_allowance |= held.is_some_and(|a| !a.is_zero());
                    }
                }
                (None, _) => {}
            }
            if let Some(declared) = intent.declared() {
                at_least(&mut effects, declared);
            }
            // A limited key's call is understood only if all it writes is read: the wallet's
            // nonce, and the storage of contracts whose every event became effects.
            let unexplained = match watch {
                Some(_) if call => match client.state_changes(signing).await? {
                    Some(changes) => unexplained(from, &changes, &logs),
                    None => Some(format!(
                        "{} cannot trace what the call writes (debug_traceCall with the prestate tracer)",
                        chain.slug()
                    )),
                },
                _ => None,
            };
            Ok(Foresight {
                output,
                effects: Foreseen::Known(effects),
                holds_allowance,
                unexplained,
            })
        }
        // Without a simulation the token's answer is read alone.
        Simulation::Unavailable(why) => Ok(Foresight {
            output: client
                .call_from(Some(from), intent.to, intent.input.clone())
                .await
                .unwrap_or_default(),
            effects: Foreseen::Unknown(format!("{}: {why}", chain.slug())),
            holds_allowance: false,
            unexplained: None,
        }),
    }
}
