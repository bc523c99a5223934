//! Tests of the swap guard: EVM and Solana swap transactions that differ from the request
//! (router, sender, value, fee payer, signatures, programs, compute budget) are refused.

use alloy::primitives::{Bytes, address};
use solana_hash::Hash;
use solana_keypair::Keypair;
use solana_message::{VersionedMessage, v0};
use solana_signer::Signer as _;
use solana_transaction::Instruction;

use super::*;

const WALLET: Address = address!("1000000000000000000000000000000000000001");
const ROUTER: Address = address!("2000000000000000000000000000000000000002");
const TOKEN: Address = address!("3000000000000000000000000000000000000003");

fn evm_tx() -> EvmSwapTx {
    EvmSwapTx {
        from: WALLET,
        to: ROUTER,
        data: Bytes::from_static(&[1, 2, 3, 4]),
        value: U256::from(5),
        gas: 0,
        gas_price: U256::ZERO,
    }
}

fn evm_terms(src: Address) -> EvmTerms<'static> {
    EvmTerms {
        wallet: WALLET,
        src,
        amount: U256::from(5),
        spender: ROUTER,
        routers: &[ROUTER, TOKEN],
    }
}

fn check(tx: &EvmSwapTx, terms: &EvmTerms<'_>) -> Option<&'static str> {
    check_evm(tx, terms).err().map(|r| r.check)
}

#[test]
fn an_evm_swap_must_call_the_router_with_the_right_value_for_the_wallet() {
    assert_eq!(check(&evm_tx(), &evm_terms(NATIVE_TOKEN)), None);
    let allowed = EvmSwapTx {
        to: TOKEN,
        ..evm_tx()
    };
    assert_eq!(
        check(&allowed, &evm_terms(NATIVE_TOKEN)),
        None,
        "allow list"
    );
    let elsewhere = EvmSwapTx {
        to: WALLET,
        ..evm_tx()
    };
    assert_eq!(check(&elsewhere, &evm_terms(NATIVE_TOKEN)), Some("router"));
    // The aggregator's own word for its router is no permission.
    let named = EvmTerms {
        spender: WALLET,
        ..evm_terms(NATIVE_TOKEN)
    };
    assert_eq!(check(&evm_tx(), &named), Some("spender"));
    let unlisted = EvmTerms {
        routers: &[TOKEN],
        ..evm_terms(NATIVE_TOKEN)
    };
    assert_eq!(check(&evm_tx(), &unlisted), Some("spender"));
    let other_sender = EvmSwapTx {
        from: ROUTER,
        ..evm_tx()
    };
    assert_eq!(check(&other_sender, &evm_terms(NATIVE_TOKEN)), Some("from"));
    // An ERC20 sale sends no coin along; a native one sends exactly the amount.
    assert_eq!(check(&evm_tx(), &evm_terms(TOKEN)), Some("value"));
    let more = EvmSwapTx {
        value: U256::from(6),
        ..evm_tx()
    };
    assert_eq!(check(&more, &evm_terms(NATIVE_TOKEN)), Some("value"));
    let empty = EvmSwapTx {
        data: Bytes::new(),
        ..evm_tx()
    };
    assert_eq!(check(&empty, &evm_terms(NATIVE_TOKEN)), Some("data"));
    let refusal: WalletOpsError = check_evm(&elsewhere, &evm_terms(NATIVE_TOKEN))
        .expect_err("refused")
        .into();
    assert!(
        matches!(&refusal, WalletOpsError::SendFailed(m) if m.contains("router check")),
        "{refusal:?}"
    );
}

/// A transaction over `instructions` paid by `payer`, signed by every one of `cosigners`
/// but not by the payer.
fn solana_tx(
    payer: &Pubkey,
    cosigners: &[&Keypair],
    instructions: &[Instruction],
) -> VersionedTransaction {
    let message =
        v0::Message::try_compile(payer, instructions, &[], Hash::new_unique()).expect("compiles");
    let message = VersionedMessage::V0(message);
    let bytes = message.serialize();
    let required = usize::from(message.header().num_required_signatures);
    let mut signatures = vec![Signature::default(); required];
    for signer in cosigners {
        let at = message
            .static_account_keys()
            .iter()
            .position(|k| *k == signer.pubkey())
            .expect("a signer of the message");
        signatures[at] = signer.sign_message(&bytes);
    }
    VersionedTransaction {
        signatures,
        message,
    }
}

fn transfer(from: &Pubkey, to: &Pubkey) -> Instruction {
    solana_system_interface::instruction::transfer(from, to, 1)
}

fn solana_terms(wallet: Pubkey, allowed: &[Pubkey]) -> SolanaTerms<'_> {
    SolanaTerms {
        wallet,
        allowed_programs: allowed,
        max_fee_lamports: 20_000,
        max_compute_units: 400_000,
    }
}

fn solana_check(tx: &VersionedTransaction, terms: &SolanaTerms<'_>) -> Option<&'static str> {
    check_solana(tx, terms).err().map(|r| r.check)
}

#[test]
fn a_solana_swap_lacks_only_the_wallets_signature_and_stays_under_the_caps() {
    let wallet = Pubkey::new_unique();
    let pool = Keypair::new();
    let allowed = [
        solana_system_interface::program::ID,
        solana_compute_budget_interface::ID,
    ];
    let terms = solana_terms(wallet, &allowed);
    let swap = [
        ComputeBudgetInstruction::set_compute_unit_limit(300_000),
        ComputeBudgetInstruction::set_compute_unit_price(10_000),
        transfer(&wallet, &pool.pubkey()),
        transfer(&pool.pubkey(), &wallet),
    ];
    let tx = solana_tx(&wallet, &[&pool], &swap);
    let cost = check_solana(&tx, &terms).expect("passes");
    // Two signatures, and 10,000 micro-lamports for each of 300,000 units.
    assert_eq!(cost.fee_lamports, 2 * 5_000 + 3_000);
    assert_eq!(cost.compute_units, 300_000);

    let other_payer = solana_tx(&pool.pubkey(), &[], &swap);
    assert_eq!(solana_check(&other_payer, &terms), Some("fee payer"));
    let unsigned_pool = solana_tx(&wallet, &[], &swap);
    assert_eq!(solana_check(&unsigned_pool, &terms), Some("signatures"));
    let mut forged = tx.clone();
    forged.signatures[1] = Signature::from([7u8; 64]);
    assert_eq!(solana_check(&forged, &terms), Some("signatures"));

    let memo = Instruction::new_with_bytes(Pubkey::new_unique(), b"x", vec![]);
    let stranger = solana_tx(
        &wallet,
        &[&pool],
        &[transfer(&pool.pubkey(), &wallet), memo],
    );
    assert_eq!(solana_check(&stranger, &terms), Some("programs"));

    let hungry = [
        ComputeBudgetInstruction::set_compute_unit_limit(500_000),
        transfer(&wallet, &pool.pubkey()),
    ];
    assert_eq!(
        solana_check(&solana_tx(&wallet, &[], &hungry), &terms),
        Some("compute budget")
    );
    let pricey = [
        ComputeBudgetInstruction::set_compute_unit_price(1_000_000),
        transfer(&wallet, &pool.pubkey()),
    ];
    // No limit set: 200,000 units for the one instruction, at a lamport each.
    assert_eq!(
        solana_check(&solana_tx(&wallet, &[], &pricey), &terms),
        Some("fee")
    );
}

#[test]
fn a_solana_swap_on_a_durable_nonce_is_refused() {
    let wallet = Pubkey::new_unique();
    let pool = Keypair::new();
    let allowed = [solana_system_interface::program::ID];
    let terms = solana_terms(wallet, &allowed);
    let nonce = Pubkey::new_unique();
    let swap = [
        solana_system_interface::instruction::advance_nonce_account(&nonce, &wallet),
        transfer(&wallet, &pool.pubkey()),
        transfer(&pool.pubkey(), &wallet),
    ];
    let tx = solana_tx(&wallet, &[&pool], &swap);
    assert_eq!(solana_check(&tx, &terms), Some("nonce"));
}

mod effects {
    use walletops_domain::{Flow, Grant, GrantKind, WalletAddress};

    use super::*;

    const SOLD: Asset = Asset::Native;

    fn token() -> Asset {
        Asset::Token(WalletAddress::Evm(TOKEN))
    }

    fn flow(asset: Asset, amount: u64) -> Flow {
        Flow {
            asset,
            counterparty: WalletAddress::Evm(ROUTER),
            amount: U256::from(amount),
            token_id: None,
        }
    }

    /// An honest swap: 5 of the coin out, 100 of the token in.
    fn honest() -> Effects {
        Effects {
            outflows: vec![flow(SOLD, 5)],
            inflows: vec![flow(token(), 100)],
            grants: Vec::new(),
        }
    }

    fn why(effects: &Effects) -> Option<String> {
        let terms = SwapEffects {
            sold: (SOLD, U256::from(5)),
            bought: (token(), U256::from(90)),
        };
        check_effects(effects, &terms).err().map(|r| r.why)
    }

    #[test]
    fn an_honest_swap_passes() {
        assert_eq!(why(&honest()), None);
    }

    #[test]
    fn a_swap_doing_more_or_other_than_its_terms_is_refused() {
        let mut more = honest();
        more.outflows.push(flow(SOLD, 1));
        assert!(why(&more).is_some_and(|w| w.contains("takes 6")));
        let mut other = honest();
        other.outflows.push(flow(token(), 1));
        assert!(why(&other).is_some_and(|w| w.contains("also sends 1")));
        let mut short = honest();
        short.inflows[0].amount = U256::from(89);
        assert!(why(&short).is_some_and(|w| w.contains("less than the minimum 90")));
        let mut granted = honest();
        granted.grants.push(Grant {
            kind: GrantKind::Allowance,
            asset: token(),
            spender: WalletAddress::Evm(WALLET),
            amount: None,
        });
        assert!(why(&granted).is_some_and(|w| w.contains("take all")));
    }
}

#[test]
fn a_solana_route_sells_only_into_accounts_no_key_holds() {
    use walletops_domain::{Flow, WalletAddress};
    let into = |to: Pubkey| Effects {
        outflows: vec![Flow {
            asset: Asset::Native,
            counterparty: WalletAddress::Solana(to),
            amount: U256::from(5),
            token_id: None,
        }],
        ..Effects::default()
    };
    let (vault, _) = Pubkey::find_program_address(&[b"vault"], &Pubkey::new_unique());
    assert!(check_sinks(&into(vault)).is_ok());
    let key = solana_keypair::Keypair::new();
    let refused = check_sinks(&into(solana_signer::Signer::pubkey(&key))).err();
    assert_eq!(refused.map(|r| r.check), Some("route"));
}
