//! Solana transfers of several recipients in one transaction: the instructions a transfer
//! signs, and how a payout's items are packed, as many of one asset as fit a transaction.
//!
//! Packs are fixed when a payout is stored (`pack_items`), never at signing: an item's
//! pack names the idempotency key it is paid under, so a core that makes the payout again
//! must find the same packs whatever this code would pack then.

use solana_message::Message;
use solana_pubkey::Pubkey;
use spl_associated_token_account_interface::{
    address::get_associated_token_address_with_program_id,
    instruction::create_associated_token_account_idempotent,
};

use super::solana::Leg;
use crate::error::{Result, WalletOpsError};

/// Largest serialized transaction a cluster accepts (`PACKET_DATA_SIZE`).
const PACKET: usize = 1232;
/// Room kept for what a transaction may carry beyond its transfers (a compute-unit limit
/// and price, 2 instructions and their program).
const KEPT: usize = 64;
/// Most legs one transaction carries, whatever fits.
const MOST_LEGS: usize = 24;

/// An SPL mint a transfer moves.
#[derive(Debug, Clone, Copy)]
pub struct Spl {
    /// The mint.
    pub mint: Pubkey,
    /// Its token program (Token or Token-2022).
    pub program: Pubkey,
    /// Its decimals, checked by `transfer_checked`.
    pub decimals: u8,
}

/// The instructions that pay `legs` from `from`: a system transfer each for SOL; for SPL,
/// each recipient's associated token account created if missing (paid by `from`) and a
/// `transfer_checked` into it.
pub fn instructions(
    from: &Pubkey,
    spl: Option<Spl>,
    legs: &[Leg],
) -> Result<Vec<solana_message::Instruction>> {
    let Some(spl) = spl else {
        return Ok(legs
            .iter()
            .map(|leg| solana_system_interface::instruction::transfer(from, &leg.to, leg.amount))
            .collect());
    };
    let source = get_associated_token_address_with_program_id(from, &spl.mint, &spl.program);
    let mut out = Vec::with_capacity(legs.len() * 2);
    for leg in legs {
        let dest = get_associated_token_address_with_program_id(&leg.to, &spl.mint, &spl.program);
        out.push(create_associated_token_account_idempotent(
            from,
            &leg.to,
            &spl.mint,
            &spl.program,
        ));
        out.push(
            spl_token_2022_interface::instruction::transfer_checked(
                &spl.program,
                &source,
                &spl.mint,
                &dest,
                from,
                &[],
                leg.amount,
                spl.decimals,
            )
            .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("transfer_checked: {e}")))?,
        );
    }
    Ok(out)
}

/// Whether a transaction paying `to` from `from` (SPL of `mint`, or SOL) fits a packet,
/// with its memo and the room kept.
fn fits(from: &Pubkey, mint: Option<Pubkey>, to: &[Pubkey]) -> bool {
    let spl = mint.map(|mint| Spl {
        mint,
        program: spl_token_interface::ID,
        decimals: 0,
    });
    let legs: Vec<Leg> = to.iter().map(|&to| Leg { to, amount: 1 }).collect();
    let Ok(mut ixs) = instructions(from, spl, &legs) else {
        return false;
    };
    // The memo every transfer carries: its record's id.
    ixs.push(spl_memo_interface::instruction::build_memo(
        &spl_memo_interface::v3::ID,
        uuid::Uuid::nil().to_string().as_bytes(),
        &[],
    ));
    let message = Message::new(&ixs, Some(from));
    // One signature: its count and its 64 bytes.
    1 + 64 + message.serialize().len() + KEPT <= PACKET
}

/// For each item (its mint, `None` for SOL, and its recipient), the index of the first item
/// of the transaction it is paid in: items of one mint in request order, as many to a
/// transaction as fit.
pub fn pack_items(from: &Pubkey, items: &[(Option<Pubkey>, Pubkey)]) -> Vec<u32> {
    // Per mint, the pack being filled: its first item and its recipients.
    let mut open: Vec<(Option<Pubkey>, u32, Vec<Pubkey>)> = Vec::new();
    let mut out = Vec::with_capacity(items.len());
    for (index, (mint, to)) in items.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let pack = match open.iter_mut().find(|(m, ..)| m == mint) {
            Some((_, first, recipients)) => {
                recipients.push(*to);
                if recipients.len() > MOST_LEGS || !fits(from, *mint, recipients) {
                    *first = index;
                    *recipients = vec![*to];
                }
                *first
            }
            None => {
                open.push((*mint, index, vec![*to]));
                index
            }
        };
        out.push(pack);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_of_one_asset_share_transactions_as_many_as_fit() {
        let from = Pubkey::new_unique();
        let mint = Pubkey::new_unique();
        let mut items: Vec<(Option<Pubkey>, Pubkey)> =
            (0..60).map(|_| (None, Pubkey::new_unique())).collect();
        items.extend((0..30).map(|_| (Some(mint), Pubkey::new_unique())));
        let packs = pack_items(&from, &items);
        assert_eq!(packs.len(), 90);
        assert_eq!(
            packs,
            pack_items(&from, &items),
            "the same items, the same packs"
        );
        let sizes = |range: std::ops::Range<usize>| {
            let mut sizes: Vec<usize> = Vec::new();
            for w in packs[range].chunk_by(|a, b| a == b) {
                sizes.push(w.len());
            }
            sizes
        };
        let sol = sizes(0..60);
        let spl = sizes(60..90);
        // Every pack but the last is full.
        assert!(sol[..sol.len() - 1].iter().all(|&n| n >= 15), "{sol:?}");
        assert_eq!(sol.iter().sum::<usize>(), 60);
        assert!(spl[0] >= 6, "{spl:?}");
        // Each pack fits a packet; one more leg would not (or the cap holds).
        assert!(fits(&from, None, &[Pubkey::new_unique(); 1]));
        let first: Vec<Pubkey> = items[..sol[0]].iter().map(|i| i.1).collect();
        assert!(fits(&from, None, &first));
        let mut more = first.clone();
        more.push(Pubkey::new_unique());
        assert!(!fits(&from, None, &more) || more.len() > MOST_LEGS);
        // Interleaved assets are packed per asset, the first item naming each pack.
        let mixed = [
            (None, Pubkey::new_unique()),
            (Some(mint), Pubkey::new_unique()),
            (None, Pubkey::new_unique()),
        ];
        assert_eq!(pack_items(&from, &mixed), [0, 1, 0]);
    }
}
