//! The two wire forms of an executed Solana instruction read into an `Op`: the binary
//! layouts of System, SPL Token and Token-2022 (transaction-effects.md §7), and the
//! `jsonParsed` form agave gives a simulation's inner instructions.

use serde_json::Value;
use solana_pubkey::Pubkey;

use super::{ACCOUNT_OWNER, CLOSE_ACCOUNT, Op, SYSTEM, TOKEN, TOKEN_2022};

fn name(program: &Pubkey) -> &'static str {
    match *program {
        SYSTEM => "System",
        TOKEN => "SPL Token",
        TOKEN_2022 => "Token-2022",
        _ => "unknown",
    }
}

/// The instruction of `program` over `accounts` (resolved to addresses) with `data`, in the
/// binary layouts of System, SPL Token and Token-2022.
pub fn op_of(program: &Pubkey, accounts: &[Pubkey], data: &[u8]) -> Op {
    let read = match *program {
        SYSTEM => system(accounts, data),
        TOKEN | TOKEN_2022 => token(*program == TOKEN_2022, accounts, data),
        _ => return Op::Harmless,
    };
    read.unwrap_or_else(|what| Op::Unreadable {
        program: name(program),
        what,
        accounts: accounts.to_vec(),
    })
}

/// Reads an instruction's data and accounts in order; its errors say which instruction.
struct Reader<'a> {
    data: &'a [u8],
    accounts: &'a [Pubkey],
    tag: u32,
}

impl Reader<'_> {
    fn malformed(&self) -> String {
        format!("instruction {}, which does not decode", self.tag)
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let (head, rest) = self
            .data
            .split_first_chunk::<N>()
            .ok_or_else(|| self.malformed())?;
        self.data = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        self.take::<1>().map(|[b]| b)
    }

    fn u64(&mut self) -> Result<u64, String> {
        self.take().map(u64::from_le_bytes)
    }

    fn key(&mut self) -> Result<Pubkey, String> {
        self.take().map(Pubkey::new_from_array)
    }

    /// Skips a bincode `String` (u64 length, bytes).
    fn string(&mut self) -> Result<(), String> {
        let len = usize::try_from(self.u64()?).map_err(|_| self.malformed())?;
        self.data = self.data.get(len..).ok_or_else(|| self.malformed())?;
        Ok(())
    }

    fn at(&self, index: usize) -> Result<Pubkey, String> {
        self.accounts
            .get(index)
            .copied()
            .ok_or_else(|| self.malformed())
    }
}

/// System instructions: bincode, a u32 tag.
fn system(accounts: &[Pubkey], data: &[u8]) -> Result<Op, String> {
    let Some((tag, data)) = data.split_first_chunk::<4>() else {
        return Err("an instruction without a tag".to_owned());
    };
    let tag = u32::from_le_bytes(*tag);
    let mut r = Reader {
        data,
        accounts,
        tag,
    };
    Ok(match tag {
        0 => Op::CreateAccount {
            from: r.at(0)?,
            new: r.at(1)?,
            lamports: r.u64()?,
            space: r.u64()?,
            owner: r.key()?,
        },
        1 => Op::Assign {
            account: r.at(0)?,
            owner: r.key()?,
        },
        2 => Op::SystemTransfer {
            from: r.at(0)?,
            to: r.at(1)?,
            lamports: r.u64()?,
        },
        3 => {
            // The base and seed only derive the new address, which the accounts name.
            r.key()?;
            r.string()?;
            Op::CreateAccount {
                from: r.at(0)?,
                new: r.at(1)?,
                lamports: r.u64()?,
                space: r.u64()?,
                owner: r.key()?,
            }
        }
        13 => {
            let (lamports, space, owner) = (r.u64()?, r.u64()?, r.key()?);
            let new = r.at(0)?;
            // The funding account comes second, and only when it gives something.
            let from = if lamports == 0 { new } else { r.at(1)? };
            Op::CreateAccount {
                from,
                new,
                lamports,
                space,
                owner,
            }
        }
        // Nonce advance and upgrade: nothing leaves or changes hands.
        4 | 12 => Op::Harmless,
        // Allocating the wallet bricks it (System transfers refuse an account with data), and
        // a nonce set up on it hands its lamports to the nonce's authority: never let through.
        6 => return Err("instruction 6 (InitializeNonceAccount)".to_owned()),
        8 => return Err("instruction 8 (Allocate)".to_owned()),
        9 => return Err("instruction 9 (AllocateWithSeed)".to_owned()),
        // 5 and 11 move lamports of accounts the signer controls but that are not the
        // wallet's own, 7 and 10 hand such accounts over: not read, so never let through.
        5 => return Err("instruction 5 (WithdrawNonceAccount)".to_owned()),
        7 => return Err("instruction 7 (AuthorizeNonceAccount)".to_owned()),
        10 => return Err("instruction 10 (AssignWithSeed)".to_owned()),
        11 => return Err("instruction 11 (TransferWithSeed)".to_owned()),
        _ => return Err(format!("instruction {tag}")),
    })
}

/// SPL Token and Token-2022 instructions: a u8 tag, LE amounts.
fn token(is_2022: bool, accounts: &[Pubkey], data: &[u8]) -> Result<Op, String> {
    let Some((&tag, data)) = data.split_first() else {
        return Err("an instruction without a tag".to_owned());
    };
    let mut r = Reader {
        data,
        accounts,
        tag: tag.into(),
    };
    let checked = |r: &mut Reader<'_>| -> Result<Op, String> {
        Ok(Op::TokenTransfer {
            source: r.at(0)?,
            mint: Some(r.at(1)?),
            destination: r.at(2)?,
            authority: r.at(3)?,
            amount: r.u64()?,
        })
    };
    Ok(match tag {
        1 => Op::InitializeAccount {
            account: r.at(0)?,
            mint: r.at(1)?,
            owner: r.at(2)?,
        },
        16 | 18 => Op::InitializeAccount {
            account: r.at(0)?,
            mint: r.at(1)?,
            owner: r.key()?,
        },
        3 => Op::TokenTransfer {
            source: r.at(0)?,
            destination: r.at(1)?,
            authority: r.at(2)?,
            amount: r.u64()?,
            mint: None,
        },
        12 => checked(&mut r)?,
        // `TransferFeeExtension` 1 is `TransferCheckedWithFee`: the sender loses `amount`.
        26 if is_2022 && data.first() == Some(&1) => {
            r.u8()?;
            checked(&mut r)?
        }
        4 => Op::Approve {
            source: r.at(0)?,
            delegate: r.at(1)?,
            amount: r.u64()?,
        },
        13 => Op::Approve {
            source: r.at(0)?,
            delegate: r.at(2)?,
            amount: r.u64()?,
        },
        6 => Op::SetAuthority {
            account: r.at(0)?,
            authority_type: r.u8()?,
            new: match r.u8()? {
                0 => None,
                1 => Some(r.key()?),
                _ => return Err(r.malformed()),
            },
        },
        8 | 15 => Op::Burn {
            account: r.at(0)?,
            mint: r.at(1)?,
            amount: r.u64()?,
        },
        9 => Op::Close {
            account: r.at(0)?,
            destination: r.at(1)?,
        },
        // Mint and multisig setup, `Revoke`, `MintTo` (to anyone: it only adds), freeze and
        // thaw, `SyncNative`, size and amount queries, `InitializeImmutableOwner`.
        0 | 2 | 5 | 7 | 10 | 11 | 14 | 17 | 19..=24 => Op::Harmless,
        _ => {
            let known = match tag {
                26 => " (TransferFeeExtension)",
                27 => " (ConfidentialTransferExtension)",
                38 => " (WithdrawExcessLamports)",
                45 => " (UnwrapLamports)",
                255 => " (Batch)",
                _ => "",
            };
            return Err(format!("instruction {tag}{known}"));
        }
    })
}

/// An instruction in the `jsonParsed` form agave gives inner instructions: parsed
/// (`program`, `programId`, `parsed: {type, info}`), or partially decoded (`programId`,
/// `accounts`, base58 `data`) when the node could not parse it.
pub fn op_of_parsed(instruction: &Value) -> Op {
    let program = instruction
        .get("programId")
        .and_then(Value::as_str)
        .and_then(|p| p.parse::<Pubkey>().ok());
    let Some(program) = program else {
        return Op::Unreadable {
            program: "unknown",
            what: "an instruction without a readable programId".to_owned(),
            accounts: keys_in(instruction),
        };
    };
    if ![SYSTEM, TOKEN, TOKEN_2022].contains(&program) {
        return Op::Harmless;
    }
    if let Some(parsed) = instruction.get("parsed") {
        let kind = parsed.get("type").and_then(Value::as_str).unwrap_or("");
        let info = parsed.get("info").unwrap_or(&Value::Null);
        let op = if program == SYSTEM {
            parsed_system(kind, info)
        } else {
            parsed_token(kind, info)
        };
        return op.unwrap_or_else(|| Op::Unreadable {
            program: name(&program),
            what: format!("instruction `{kind}`"),
            accounts: keys_in(info),
        });
    }
    let accounts = instruction.get("accounts").and_then(Value::as_array);
    let accounts: Option<Vec<Pubkey>> =
        accounts.and_then(|a| a.iter().map(|k| k.as_str()?.parse().ok()).collect());
    let data = instruction.get("data").and_then(Value::as_str);
    match (accounts, data.and_then(|d| bs58::decode(d).into_vec().ok())) {
        (Some(accounts), Some(data)) => op_of(&program, &accounts, &data),
        _ => Op::Unreadable {
            program: name(&program),
            what: "an instruction that does not decode".to_owned(),
            accounts: keys_in(instruction),
        },
    }
}

/// Every address a JSON value names: what an unread parsed instruction touches.
fn keys_in(value: &Value) -> Vec<Pubkey> {
    match value {
        Value::String(s) => s.parse().ok().into_iter().collect(),
        Value::Array(items) => items.iter().flat_map(keys_in).collect(),
        Value::Object(fields) => fields.values().flat_map(keys_in).collect(),
        _ => Vec::new(),
    }
}

fn key_at(info: &Value, field: &str) -> Option<Pubkey> {
    info.get(field)?.as_str()?.parse().ok()
}

/// A number, or a decimal string (token amounts are strings, lamports numbers).
fn num_at(info: &Value, field: &str) -> Option<u64> {
    match info.get(field)? {
        Value::String(s) => s.parse().ok(),
        v => v.as_u64(),
    }
}

/// A parsed System instruction; `None`: not read.
fn parsed_system(kind: &str, info: &Value) -> Option<Op> {
    let k = |field| key_at(info, field);
    let n = |field| num_at(info, field);
    Some(match kind {
        "transfer" => Op::SystemTransfer {
            from: k("source")?,
            to: k("destination")?,
            lamports: n("lamports")?,
        },
        "createAccount" | "createAccountWithSeed" => Op::CreateAccount {
            from: k("source")?,
            new: k("newAccount")?,
            lamports: n("lamports")?,
            space: n("space")?,
            owner: k("owner")?,
        },
        "createAccountAllowPrefund" => {
            let (new, lamports) = (k("newAccount")?, n("lamports").unwrap_or(0));
            Op::CreateAccount {
                from: if lamports == 0 { new } else { k("source")? },
                new,
                lamports,
                space: n("space")?,
                owner: k("owner")?,
            }
        }
        "assign" => Op::Assign {
            account: k("account")?,
            owner: k("owner")?,
        },
        // Allocating the wallet, or a nonce set up on it, hands it over (see `op_of`).
        "advanceNonce" | "upgradeNonce" => Op::Harmless,
        _ => return None,
    })
}

/// A parsed SPL Token or Token-2022 instruction (agave names both `spl-token`); `None`: not
/// read.
fn parsed_token(kind: &str, info: &Value) -> Option<Op> {
    let k = |field| key_at(info, field);
    let amount = || {
        let checked = || num_at(info.get("tokenAmount")?, "amount");
        num_at(info, "amount").or_else(checked)
    };
    Some(match kind {
        "transfer" | "transferChecked" | "transferCheckedWithFee" => Op::TokenTransfer {
            source: k("source")?,
            destination: k("destination")?,
            authority: k("authority").or_else(|| k("multisigAuthority"))?,
            amount: amount()?,
            mint: k("mint"),
        },
        "approve" | "approveChecked" => Op::Approve {
            source: k("source")?,
            delegate: k("delegate")?,
            amount: amount()?,
        },
        "setAuthority" => {
            let Some(account) = k("account") else {
                // A mint's authorities: they hold none of the wallet's tokens.
                k("mint")?;
                return Some(Op::Harmless);
            };
            let authority_type = match info.get("authorityType")?.as_str()? {
                "mintTokens" => 0,
                "freezeAccount" => 1,
                "accountOwner" => ACCOUNT_OWNER,
                "closeAccount" => CLOSE_ACCOUNT,
                _ => return None,
            };
            let new = match info.get("newAuthority")? {
                Value::Null => None,
                new => Some(new.as_str()?.parse().ok()?),
            };
            Op::SetAuthority {
                account,
                authority_type,
                new,
            }
        }
        "closeAccount" => Op::Close {
            account: k("account")?,
            destination: k("destination")?,
        },
        "burn" | "burnChecked" => Op::Burn {
            account: k("account")?,
            mint: k("mint")?,
            amount: amount()?,
        },
        "initializeAccount" | "initializeAccount2" | "initializeAccount3" => {
            Op::InitializeAccount {
                account: k("account")?,
                mint: k("mint")?,
                owner: k("owner")?,
            }
        }
        "syncNative"
        | "revoke"
        | "getAccountDataSize"
        | "initializeImmutableOwner"
        | "mintTo"
        | "mintToChecked"
        | "freezeAccount"
        | "thawAccount"
        | "initializeMint"
        | "initializeMint2"
        | "initializeMultisig"
        | "initializeMultisig2"
        | "amountToUiAmount"
        | "uiAmountToAmount" => Op::Harmless,
        _ => return None,
    })
}
