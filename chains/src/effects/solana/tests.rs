//! A Solana transaction's instructions (real instruction bytes from the interface crates'
//! builders, and agave's `jsonParsed` form) read into effects on its wallet: what leaves, what
//! comes in, what is granted, what is rent, and what cannot be read.

use serde_json::{Value, json};
use solana_system_interface::instruction as system;
use solana_transaction::Instruction;
use spl_associated_token_account_interface::instruction::create_associated_token_account;
use spl_token_2022_interface::extension::transfer_fee::instruction::transfer_checked_with_fee;
use spl_token_2022_interface::instruction::{self as token22, AuthorityType};
use spl_token_interface::instruction as token;

use super::*;

const WALLET: Pubkey = Pubkey::new_from_array([1; 32]);
const STRANGER: Pubkey = Pubkey::new_from_array([2; 32]);
const MINT: Pubkey = Pubkey::new_from_array([3; 32]);
/// The wallet's account of `MINT`.
const ATA: Pubkey = Pubkey::new_from_array([4; 32]);
/// The stranger's account of `MINT`.
const STRANGER_ATA: Pubkey = Pubkey::new_from_array([5; 32]);
/// The wallet's second account of `MINT`.
const SECOND: Pubkey = Pubkey::new_from_array([6; 32]);
/// The wallet's wrapped SOL account.
const WSOL: Pubkey = Pubkey::new_from_array([7; 32]);
/// An account the pre-state does not know.
const UNKNOWN: Pubkey = Pubkey::new_from_array([8; 32]);
/// An account the transaction creates.
const NEW: Pubkey = Pubkey::new_from_array([9; 32]);
const PROGRAM: Pubkey = Pubkey::new_from_array([10; 32]);

/// The rent of a 165-byte SPL Token account.
const RENT: u64 = 2_039_280;

fn accounts() -> HashMap<Pubkey, TokenAccount> {
    let of = |mint, owner| TokenAccount { mint, owner };
    HashMap::from([
        (ATA, of(MINT, WALLET)),
        (SECOND, of(MINT, WALLET)),
        (WSOL, of(WRAPPED_SOL, WALLET)),
        (STRANGER_ATA, of(MINT, STRANGER)),
    ])
}

fn op(ix: Instruction) -> Op {
    let keys: Vec<Pubkey> = ix.accounts.iter().map(|m| m.pubkey).collect();
    op_of(&ix.program_id, &keys, &ix.data)
}

fn read(ops: &[Op]) -> Result<Effects, Unreadable> {
    effects_of(&WALLET, &accounts(), ops)
}

fn flow(asset: Asset, counterparty: Pubkey, amount: u64) -> Flow {
    Flow {
        asset,
        counterparty: WalletAddress::Solana(counterparty),
        amount: U256::from(amount),
        token_id: None,
    }
}

fn mint() -> Asset {
    Asset::Token(WalletAddress::Solana(MINT))
}

fn grant(kind: GrantKind, asset: Asset, spender: Pubkey, amount: Option<u64>) -> Grant {
    Grant {
        kind,
        asset,
        spender: WalletAddress::Solana(spender),
        amount: amount.map(U256::from),
    }
}

fn transfer_checked(source: &Pubkey, destination: &Pubkey, amount: u64) -> Op {
    let ix = token22::transfer_checked(
        &TOKEN_2022,
        source,
        &MINT,
        destination,
        &WALLET,
        &[],
        amount,
        6,
    );
    op(ix.expect("builds"))
}

/// What the ATA program CPIs to create `account` of `mint` for `owner`, funded by the wallet.
fn ata_creation(account: Pubkey, mint: Pubkey, owner: Pubkey) -> Vec<Op> {
    vec![
        op(create_associated_token_account(
            &WALLET, &owner, &mint, &TOKEN,
        )),
        op(system::create_account(&WALLET, &account, RENT, 165, &TOKEN)),
        op(token::initialize_immutable_owner(&TOKEN, &account).expect("builds")),
        op(token::initialize_account3(&TOKEN, &account, &mint, &owner).expect("builds")),
    ]
}

#[test]
fn a_sol_transfer_out_is_a_native_outflow() {
    let effects = read(&[op(system::transfer(&WALLET, &STRANGER, 5_000))]);
    let effects = effects.expect("reads");
    assert_eq!(effects.outflows, [flow(Asset::Native, STRANGER, 5_000)]);
    assert!(effects.inflows.is_empty() && effects.grants.is_empty());
}

#[test]
fn a_token_transfer_out_goes_to_the_destinations_owner_when_known() {
    let effects = read(&[
        transfer_checked(&ATA, &STRANGER_ATA, 7),
        transfer_checked(&ATA, &UNKNOWN, 9),
    ]);
    let effects = effects.expect("reads");
    assert_eq!(
        effects.outflows,
        [flow(mint(), STRANGER, 7), flow(mint(), UNKNOWN, 9)]
    );
    assert_eq!(effects.outflow_of(mint()), U256::from(16));
}

#[test]
fn the_unchecked_and_fee_paying_transfers_are_read_too() {
    let legacy = token::transfer(&TOKEN, &ATA, &STRANGER_ATA, &WALLET, &[], 3);
    let with_fee =
        transfer_checked_with_fee(&TOKEN_2022, &ATA, &MINT, &UNKNOWN, &WALLET, &[], 100, 6, 1);
    let ops = [op(legacy.expect("builds")), op(with_fee.expect("builds"))];
    let effects = read(&ops).expect("reads");
    // The mint of an unchecked transfer is the source's; a fee comes out of the amount.
    assert_eq!(
        effects.outflows,
        [flow(mint(), STRANGER, 3), flow(mint(), UNKNOWN, 100)]
    );
}

#[test]
fn the_json_parsed_forms_read_as_the_binary_ones() {
    let parsed = |program: Pubkey, kind: &str, info: Value| {
        op_of_parsed(&json!({
            "program": "spl-token",
            "programId": program.to_string(),
            "parsed": {"type": kind, "info": info},
            "stackHeight": 2,
        }))
    };
    let checked = parsed(
        TOKEN_2022,
        "transferChecked",
        json!({
            "source": ATA.to_string(),
            "mint": MINT.to_string(),
            "destination": STRANGER_ATA.to_string(),
            "authority": WALLET.to_string(),
            "tokenAmount": {"amount": "7", "decimals": 6, "uiAmount": 0.000007, "uiAmountString": "0.000007"},
        }),
    );
    assert_eq!(checked, transfer_checked(&ATA, &STRANGER_ATA, 7));
    let multisig = parsed(
        TOKEN,
        "transfer",
        json!({
            "source": ATA.to_string(),
            "destination": UNKNOWN.to_string(),
            "multisigAuthority": STRANGER.to_string(),
            "signers": [WALLET.to_string()],
            "amount": "9",
        }),
    );
    let lamports = parsed(
        SYSTEM,
        "transfer",
        json!({"source": WALLET.to_string(), "destination": STRANGER.to_string(), "lamports": 5}),
    );
    // Partially decoded: the accounts and base58 data of the binary form.
    let ix = token22::transfer_checked(&TOKEN_2022, &ATA, &MINT, &UNKNOWN, &WALLET, &[], 4, 6);
    let ix = ix.expect("builds");
    let partial = op_of_parsed(&json!({
        "programId": TOKEN_2022.to_string(),
        "accounts": ix.accounts.iter().map(|m| m.pubkey.to_string()).collect::<Vec<_>>(),
        "data": bs58::encode(&ix.data).into_string(),
        "stackHeight": 2,
    }));
    let effects = read(&[checked, multisig, lamports, partial]).expect("reads");
    assert_eq!(
        effects.outflows,
        [
            flow(mint(), STRANGER, 7),
            flow(mint(), UNKNOWN, 9),
            flow(Asset::Native, STRANGER, 5),
            flow(mint(), UNKNOWN, 4),
        ]
    );
}

#[test]
fn json_parsed_grants_creations_and_harmless_instructions() {
    let parsed = |program: Pubkey, kind: &str, info: Value| {
        op_of_parsed(
            &json!({"programId": program.to_string(), "parsed": {"type": kind, "info": info}}),
        )
    };
    let s = |k: Pubkey| k.to_string();
    let ops = [
        parsed(
            SYSTEM,
            "createAccount",
            json!({"source": s(WALLET), "newAccount": s(NEW), "lamports": RENT, "space": 165, "owner": s(TOKEN)}),
        ),
        parsed(
            TOKEN,
            "initializeAccount3",
            json!({"account": s(NEW), "mint": s(MINT), "owner": s(STRANGER)}),
        ),
        parsed(
            TOKEN,
            "approveChecked",
            json!({"source": s(ATA), "mint": s(MINT), "delegate": s(STRANGER), "owner": s(WALLET),
                   "tokenAmount": {"amount": "50", "decimals": 6}}),
        ),
        parsed(
            TOKEN,
            "setAuthority",
            json!({"account": s(ATA), "authority": s(WALLET), "authorityType": "accountOwner", "newAuthority": s(STRANGER)}),
        ),
        parsed(
            TOKEN,
            "setAuthority",
            json!({"account": s(SECOND), "authority": s(WALLET), "authorityType": "closeAccount", "newAuthority": null}),
        ),
        parsed(
            TOKEN,
            "closeAccount",
            json!({"account": s(SECOND), "destination": s(STRANGER), "owner": s(WALLET)}),
        ),
        parsed(
            SYSTEM,
            "assign",
            json!({"account": s(WALLET), "owner": s(PROGRAM)}),
        ),
        parsed(TOKEN, "syncNative", json!({"account": s(WSOL)})),
        op_of_parsed(&json!({
            "program": "spl-associated-token-account",
            "programId": spl_associated_token_account_interface::program::ID.to_string(),
            "parsed": {"type": "createIdempotent", "info": {"source": s(WALLET), "wallet": s(WALLET)}},
        })),
    ];
    assert_eq!(ops[7], Op::Harmless);
    assert_eq!(ops[8], Op::Harmless);
    let effects = read(&ops).expect("reads");
    // The stranger's new token account: its rent leaves the wallet for the stranger.
    assert_eq!(effects.outflows, [flow(Asset::Native, STRANGER, RENT)]);
    assert_eq!(
        effects.grants,
        [
            grant(GrantKind::Delegation, mint(), STRANGER, Some(50)),
            grant(GrantKind::Authority, mint(), STRANGER, None),
            grant(GrantKind::Authority, mint(), STRANGER, None),
            grant(GrantKind::Authority, Asset::Native, PROGRAM, None),
        ]
    );
    let unknown = parsed(
        SYSTEM,
        "transferWithSeed",
        json!({"source": s(UNKNOWN), "sourceBase": s(WALLET)}),
    );
    let err = read(&[unknown]).expect_err("unread");
    assert!(err.to_string().contains("`transferWithSeed`"), "{err}");
}

#[test]
fn the_rent_of_a_new_account_for_another_is_an_outflow_to_its_owner() {
    // A payee's new associated token account: its rent leaves with it, to the payee who may
    // close it.
    let mut ops = ata_creation(NEW, MINT, STRANGER);
    assert_eq!(
        read(&ops).expect("reads").outflows,
        [flow(Asset::Native, STRANGER, RENT)]
    );
    // The account is the stranger's from its initialization on.
    ops.push(transfer_checked(&ATA, &NEW, 11));
    ops.push(op(system::create_account(
        &WALLET,
        &UNKNOWN,
        RENT + 500,
        165,
        &TOKEN_2022,
    )));
    let effects = read(&ops).expect("reads");
    assert_eq!(
        effects.outflows,
        [
            flow(Asset::Native, STRANGER, RENT),
            flow(mint(), STRANGER, 11),
            flow(Asset::Native, UNKNOWN, RENT + 500)
        ]
    );
    // Any other program's new account is paid for in full; the wallet's own costs nothing.
    let other = read(&[op(system::create_account(&WALLET, &NEW, 900, 10, &PROGRAM))]);
    assert_eq!(
        other.expect("reads").outflows,
        [flow(Asset::Native, NEW, 900)]
    );
    let own = ata_creation(NEW, MINT, WALLET);
    assert_eq!(read(&own), Ok(Effects::default()));
}

#[test]
fn wrapping_sol_stays_the_wallets_and_wrapped_sol_sent_is_native() {
    let mut ops = ata_creation(NEW, WRAPPED_SOL, WALLET);
    ops.push(op(system::transfer(&WALLET, &NEW, 1_000_000)));
    ops.push(op(token::sync_native(&TOKEN, &NEW).expect("builds")));
    ops.push(op(system::transfer(&WALLET, &WSOL, 2_000)));
    assert_eq!(read(&ops), Ok(Effects::default()));
    let send = token::transfer_checked(
        &TOKEN,
        &WSOL,
        &WRAPPED_SOL,
        &UNKNOWN,
        &WALLET,
        &[],
        1_500,
        9,
    );
    ops.push(op(send.expect("builds")));
    let effects = read(&ops).expect("reads");
    assert_eq!(effects.outflows, [flow(Asset::Native, UNKNOWN, 1_500)]);
}

#[test]
fn an_approval_is_a_delegation_unbounded_at_the_maximum() {
    let bounded = token22::approve(&TOKEN_2022, &ATA, &STRANGER, &WALLET, &[], 25);
    let unbounded = token22::approve_checked(
        &TOKEN_2022,
        &WSOL,
        &WRAPPED_SOL,
        &PROGRAM,
        &WALLET,
        &[],
        u64::MAX,
        9,
    );
    let someone_elses = token22::approve(&TOKEN_2022, &STRANGER_ATA, &WALLET, &STRANGER, &[], 1);
    let ops = [bounded, unbounded, someone_elses].map(|ix| op(ix.expect("builds")));
    assert_eq!(
        read(&ops).expect("reads").grants,
        [
            grant(GrantKind::Delegation, mint(), STRANGER, Some(25)),
            grant(GrantKind::Delegation, Asset::Native, PROGRAM, None),
        ]
    );
}

#[test]
fn handing_over_an_account_closing_it_away_or_assigning_the_wallet_is_a_grant() {
    let set = |account: &Pubkey, kind, new: Option<&Pubkey>| {
        op(token22::set_authority(&TOKEN_2022, account, new, kind, &WALLET, &[]).expect("builds"))
    };
    let ops = [
        set(&ATA, AuthorityType::AccountOwner, Some(&STRANGER)),
        // To the wallet itself, and the wallet's own mint: nothing of its tokens changes hands.
        set(&SECOND, AuthorityType::CloseAccount, Some(&WALLET)),
        set(&MINT, AuthorityType::MintTokens, Some(&STRANGER)),
        op(
            token22::close_account(&TOKEN_2022, &SECOND, &STRANGER_ATA, &WALLET, &[])
                .expect("builds"),
        ),
        op(token22::close_account(&TOKEN_2022, &ATA, &WALLET, &WALLET, &[]).expect("builds")),
        op(system::assign(&WALLET, &PROGRAM)),
        op(system::assign(&NEW, &PROGRAM)),
    ];
    assert_eq!(
        read(&ops).expect("reads").grants,
        [
            grant(GrantKind::Authority, mint(), STRANGER, None),
            grant(GrantKind::Authority, mint(), STRANGER, None),
            grant(GrantKind::Authority, Asset::Native, PROGRAM, None),
        ]
    );
}

#[test]
fn what_comes_in_is_an_inflow_from_its_sources_owner() {
    let ops = [
        transfer_checked(&STRANGER_ATA, &ATA, 40),
        op(system::transfer(&UNKNOWN, &WALLET, 3)),
    ];
    let effects = read(&ops).expect("reads");
    assert!(effects.outflows.is_empty());
    assert_eq!(
        effects.inflows,
        [flow(mint(), STRANGER, 40), flow(Asset::Native, UNKNOWN, 3)]
    );
}

#[test]
fn a_burn_is_an_outflow_to_the_mint() {
    let burn = token22::burn_checked(&TOKEN_2022, &ATA, &MINT, &WALLET, &[], 8, 6);
    let effects = read(&[op(burn.expect("builds"))]).expect("reads");
    assert_eq!(effects.outflows, [flow(mint(), MINT, 8)]);
}

#[test]
fn moves_within_the_wallet_and_between_others_are_nothing() {
    let ops = [
        transfer_checked(&ATA, &SECOND, 5),
        transfer_checked(&STRANGER_ATA, &UNKNOWN, 5),
        op(system::transfer(&WALLET, &WALLET, 5)),
        op(system::transfer(&STRANGER, &UNKNOWN, 5)),
        op(token::mint_to(&TOKEN, &MINT, &ATA, &WALLET, &[], 5).expect("builds")),
        op(token::revoke(&TOKEN, &ATA, &WALLET, &[]).expect("builds")),
    ];
    assert_eq!(read(&ops), Ok(Effects::default()));
}

#[test]
fn an_unread_instruction_on_the_wallets_accounts_makes_the_effects_unreadable() {
    let batch = |accounts: &[Pubkey]| op_of(&TOKEN, accounts, &[255, 0]);
    assert_eq!(
        read(&[batch(&[STRANGER_ATA, UNKNOWN])]),
        Ok(Effects::default())
    );
    let err = read(&[batch(&[STRANGER_ATA, ATA])]).expect_err("unread");
    assert!(
        err.0
            .contains("instruction 255 (Batch) of the SPL Token program"),
        "{err}"
    );
    let unwrap = token22::unwrap_lamports(&TOKEN_2022, &WSOL, &STRANGER, &WALLET, &[], None);
    let nonce = system::withdraw_nonce_account(&UNKNOWN, &WALLET, &STRANGER, 10);
    let seeded =
        system::transfer_with_seed(&UNKNOWN, &WALLET, "s".to_owned(), &PROGRAM, &STRANGER, 10);
    for unread in [op(unwrap.expect("builds")), op(nonce), op(seeded)] {
        assert!(matches!(unread, Op::Unreadable { .. }), "{unread:?}");
        assert!(read(&[unread]).is_err());
    }
    // Truncated data of a read instruction is no more readable.
    let short = op_of(&SYSTEM, &[WALLET, STRANGER], &[2, 0, 0, 0, 1]);
    assert!(read(&[short]).is_err());
    // Other programs' instructions move nothing themselves.
    assert_eq!(op_of(&PROGRAM, &[WALLET, ATA], &[255]), Op::Harmless);
}
