//! The first broadcast of a freshly stored transaction, and what a refusal of it means.

use super::*;

impl EvmPipeline {
    /// Follows up the first broadcast of a freshly stored transaction.
    ///
    /// Once the record is stored, the only error is a definite refusal that was recorded (the
    /// record FAILED, its nonce freed). Anything else that goes wrong on the way answers with
    /// the submission and leaves the record to the monitor: an error would mark the key's
    /// claim failed and send the caller to retry with a new key, while the monitor still
    /// sends the stored transaction, and the payment would go out twice. So does a nonce
    /// another transaction took (the wallet was used outside the service): a new nonce is
    /// the monitor's to sign, once that sight has lasted, since a gateway that retried the
    /// send may have had it mined through a node the next call does not reach, and signing
    /// now would pay twice.
    pub(super) async fn first_broadcast(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: OpenTransaction,
        answer: BroadcastOutcome,
    ) -> Result<Submission> {
        let id = open.id;
        let rejection = match answer {
            // The broadcast's note hands the record over.
            BroadcastOutcome::Accepted => return Ok(chain.submission_of(&open)),
            BroadcastOutcome::Unknown(why) => {
                tracing::warn!(%id, %why, "broadcast outcome unknown; the monitor takes over");
                self.broadcasts.hand_over(id).await;
                return Ok(chain.submission_of(&open));
            }
            BroadcastOutcome::Rejected(rejection) => rejection,
        };
        let answer = self
            .after_refusal(chain, wallet, client, &open, rejection)
            .await;
        self.broadcasts.hand_over(id).await;
        answer
    }

    /// Follows up a refusal of the first broadcast of `open`: the record failed and its
    /// nonce freed, or left to the monitor.
    async fn after_refusal(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: &OpenTransaction,
        rejection: Rejection,
    ) -> Result<Submission> {
        let id = open.id;
        // Whether the node holds one of the record's versions, which makes the refusal a
        // duplicate's: the nonce checks ask that first, any other refusal asks it here.
        let held = match &rejection {
            Rejection::NonceTooLow(why) | Rejection::Underpriced(why) => {
                match self.recovery.nonce_taken(client, open, 1).await {
                    Ok(Resign::HeldByRecord) => true,
                    // Nothing holds the nonce, by the node's pending nonce: an "underpriced"
                    // was about the transaction itself (a fee under the node's minimum), which
                    // fails it like any other refusal. A "nonce too low" says the opposite of
                    // that pending nonce: two nodes behind one gateway disagree, and one of
                    // them may have the transaction mined, so the monitor follows it up.
                    Ok(Resign::NonceFree) if matches!(rejection, Rejection::Underpriced(_)) => {
                        false
                    }
                    Ok(
                        Resign::NonceFree
                        | Resign::Resigned
                        | Resign::Shallow
                        | Resign::Unneeded
                        | Resign::Due { .. },
                    ) => {
                        tracing::info!(%id, %why, "the nonce is taken; the monitor follows the record up");
                        return Ok(chain.submission_of(open));
                    }
                    Err(e) => return Ok(handed_over(chain, open, &e)),
                }
            }
            _ => match held_by_node(client, open).await {
                Ok(held) => held,
                Err(e) => return Ok(handed_over(chain, open, &e)),
            },
        };
        if held {
            tracing::warn!(%id, ?rejection, "the node refused a transaction it holds; taken as sent");
            self.broadcasts.note(id);
            return Ok(chain.submission_of(open));
        }
        let err = match rejection {
            Rejection::InsufficientFunds(m) => {
                WalletOpsError::InsufficientFunds(format!("the node refused the transaction: {m}"))
            }
            Rejection::NonceTooLow(m) | Rejection::Underpriced(m) | Rejection::Other(m) => {
                WalletOpsError::SendFailed(format!("the node refused the transaction: {m}"))
            }
        };
        match self
            .recovery
            .fail_and_free_nonce(
                chain,
                wallet,
                client,
                open,
                TxStatus::Failed,
                &err.to_string(),
                Ending::Answered(&err),
            )
            .await
        {
            Ok(true) => Err(err),
            // The request's hold ran out and the monitor took the record up: it is its to
            // finish.
            Ok(false) => Ok(chain.submission_of(open)),
            Err(e) => Ok(handed_over(chain, open, &e)),
        }
    }
}
