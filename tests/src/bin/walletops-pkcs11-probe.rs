//! `walletops-pkcs11-probe MODULE TOKEN_LABEL PIN KEY_LABEL`: asks a PKCS#11 token for the
//! value of the private key labelled KEY_LABEL (`C_GetAttributeValue` of `CKA_VALUE`) and
//! for its `CKA_SENSITIVE` and `CKA_EXTRACTABLE`, as any program with the PIN could. Prints
//! `value: refused` or `value: N bytes`, then the two flags. A process of its own, so that
//! each test's token (its `SOFTHSM2_CONF`) is the one the module reads.

use cryptoki::{
    context::{CInitializeArgs, CInitializeFlags, Pkcs11},
    object::{Attribute, AttributeType, ObjectClass},
    session::UserType,
    types::AuthPin,
};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [module, token, pin, label] = args.as_slice() else {
        anyhow::bail!("usage: walletops-pkcs11-probe MODULE TOKEN_LABEL PIN KEY_LABEL");
    };
    let pkcs11 = Pkcs11::new(module)?;
    pkcs11.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))?;
    let slot = pkcs11
        .get_slots_with_token()?
        .into_iter()
        .find(|s| {
            pkcs11
                .get_token_info(*s)
                .is_ok_and(|i| i.label().trim_end() == token)
        })
        .ok_or_else(|| anyhow::anyhow!("no token {token}"))?;
    let session = pkcs11.open_ro_session(slot)?;
    session.login(UserType::User, Some(&AuthPin::new(pin.clone().into())))?;
    let key = *session
        .find_objects(&[
            Attribute::Class(ObjectClass::PRIVATE_KEY),
            Attribute::Label(label.as_bytes().to_vec()),
        ])?
        .first()
        .ok_or_else(|| anyhow::anyhow!("no private key {label}"))?;
    let value = session.get_attributes(key, &[AttributeType::Value]);
    match value.as_deref() {
        Ok([Attribute::Value(v)]) => println!("value: {} bytes", v.len()),
        // Sensitive attributes are skipped (or the call refused): nothing came back.
        _ => println!("value: refused"),
    }
    for attribute in
        session.get_attributes(key, &[AttributeType::Sensitive, AttributeType::Extractable])?
    {
        match attribute {
            Attribute::Sensitive(on) => println!("sensitive: {on}"),
            Attribute::Extractable(on) => println!("extractable: {on}"),
            _ => {}
        }
    }
    Ok(())
}
