//! The keystore and the local signer.

use super::*;

#[test]
fn evm_signatures_equal_alloys_local_signer() {
    use alloy::signers::SignerSync;
    // libsecp256k1 and k256 (alloy's) make the same RFC 6979 signature, low-s, recovery id.
    for _ in 0..256 {
        let signer = alloy::signers::local::PrivateKeySigner::random();
        let mut hash = alloy::primitives::B256::ZERO;
        rand::rng().fill_bytes(&mut hash.0);
        let ours = sign_evm_hash(&signer.to_bytes().0, hash).expect("signs");
        assert_eq!(ours, signer.sign_hash_sync(&hash).expect("alloy signs"));
        assert_eq!(
            ours.recover_address_from_prehash(&hash).expect("recovers"),
            signer.address()
        );
    }
    assert!(sign_evm_hash(&[0u8; 32], alloy::primitives::B256::ZERO).is_err());
    assert!(sign_evm_hash(&[1u8; 31], alloy::primitives::B256::ZERO).is_err());
}

async fn a_database_is_bound_to_the_master_key_of_its_first_core(store: walletops_store::Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two cores on one empty database, each with a key of its own: both would pass the
    // wallets' check, since there are no wallets yet.
    let first = Keystore::open(Some(&B64.encode([1u8; 32])), dir.path(), None).expect("one");
    let second = Keystore::open(Some(&B64.encode([2u8; 32])), dir.path(), None).expect("two");
    first.bind_to(&store).await.expect("the first binds");
    let err = second.bind_to(&store).await.expect_err("another key");
    assert!(format!("{err:#}").contains("master_key"), "{err:#}");
    let again = Keystore::open(Some(&B64.encode([1u8; 32])), dir.path(), None).expect("one");
    again
        .bind_to(&store)
        .await
        .expect("the same key binds again");
}

#[cfg(unix)]
#[test]
fn a_new_master_key_is_this_users_alone_and_leaves_no_draft() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    Keystore::open(None, &data, None).expect("a new key");
    let mode =
        |p: &std::path::Path| fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join(MASTER_KEY_FILE)), 0o600);
    let left: Vec<_> = fs::read_dir(&data)
        .expect("listing")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("master.key."))
        .collect();
    assert!(left.is_empty(), "no draft left behind: {left:?}");
}

/// A secret file (the master key, `hsm.pin_file`) open to other users is told apart from
/// one only its owner reads.
#[cfg(unix)]
#[test]
fn secret_files_open_to_others_are_told() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let pin = dir.path().join("pin");
    fs::write(&pin, "1234\n").expect("written");
    for (mode, open) in [(0o600, None), (0o640, Some(0o640)), (0o604, Some(0o604))] {
        fs::set_permissions(&pin, fs::Permissions::from_mode(mode)).expect("chmod");
        assert_eq!(super::open_to_others(&pin), open, "{mode:o}");
    }
}

#[test]
fn sealed_keys_open_only_for_their_wallet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ks = Keystore::open(None, dir.path(), None).expect("keystore");
    let (address, sealed) = ks.generate(ChainFamily::Evm).expect("generate");
    assert!(address.evm().is_some());
    let secret = ks.open_key(&address, &sealed).expect("open");
    assert_eq!(secret.len(), 32);
    let other: WalletAddress = alloy::primitives::Address::repeat_byte(7).into();
    assert!(ks.open_key(&other, &sealed).is_err());
    // The generated master key is reused on the next start, and kept private.
    let sample = Some((&address, &sealed));
    let again = Keystore::open(None, dir.path(), sample).expect("reopen");
    assert!(again.open_key(&address, &sealed).is_ok());
    // Another data dir: no new key beside the database's wallets, and another key
    // does not open them.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let err = Keystore::open(None, elsewhere.path(), sample).expect_err("no new key");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!elsewhere.path().join(MASTER_KEY_FILE).exists());
    let other = B64.encode([7u8; 32]);
    let err = Keystore::open(Some(&other), dir.path(), sample).expect_err("another key");
    assert!(err.to_string().contains("does not open"), "{err}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join(MASTER_KEY_FILE))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (sol, sealed) = ks.generate(ChainFamily::Solana).expect("solana");
    assert!(sol.solana().is_some());
    assert_eq!(ks.open_key(&sol, &sealed).expect("open").len(), 64);
}

#[test]
#[cfg(unix)]
fn a_key_file_linked_to_nothing_fails_the_start_and_makes_no_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(MASTER_KEY_FILE);
    std::os::unix::fs::symlink(dir.path().join("not-mounted-yet"), &path).expect("link");
    let err = load_or_create_master_key(dir.path()).expect_err("a dangling key file");
    assert!(format!("{err:#}").contains(MASTER_KEY_FILE), "{err:#}");
    let names: Vec<_> = fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, [std::ffi::OsString::from(MASTER_KEY_FILE)]);
}

#[test]
fn configured_master_key_must_be_32_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(Keystore::open(Some("c2hvcnQ="), dir.path(), None).is_err());
    let good = B64.encode([7u8; 32]);
    assert!(Keystore::open(Some(&good), dir.path(), None).is_ok());
    assert!(!dir.path().join(MASTER_KEY_FILE).exists());
}

walletops_store::on_both_backends!(a_database_is_bound_to_the_master_key_of_its_first_core);
