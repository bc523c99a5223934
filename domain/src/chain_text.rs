//! Text read from a chain: token symbols, revert reasons, node and program messages. Anyone
//! can deploy a contract whose symbol or revert string says anything (a page of text, terminal
//! escapes, right-to-left overrides that make `evil` read as `live`, instructions to an
//! agent), so it is bounded and cleaned before it reaches an answer, a record or a log.

/// The most characters a token symbol keeps.
pub const SYMBOL_CHARS: usize = 32;

/// The most characters a chain's message (a revert reason, a node's refusal) keeps.
pub const MESSAGE_CHARS: usize = 300;

/// `raw` with control characters as spaces, invisible characters (bidirectional overrides,
/// zero-width marks, tag characters, variation selectors, fillers) dropped, runs of spaces
/// collapsed, trimmed, and cut to `max_chars` characters followed by `…` when cut.
pub fn chain_text(raw: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(raw.len().min(max_chars * 4));
    let mut kept = 0;
    let mut space = false;
    for c in raw.chars() {
        if is_invisible(c) {
            continue;
        }
        if c.is_control() || c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if kept + usize::from(space) >= max_chars {
            out.push('…');
            return out;
        }
        if space {
            out.push(' ');
            kept += 1;
            space = false;
        }
        out.push(c);
        kept += 1;
    }
    out
}

/// Characters that show as nothing or change how text around them is shown: Unicode's
/// format characters (category Cf) and the invisible letters and selectors that hide text
/// from a person while a program still reads it (tag characters spell words no one sees).
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{0600}'..='\u{0605}' | '\u{06DD}'
        | '\u{070F}' | '\u{08E2}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}'
        | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{110BD}' | '\u{110CD}' | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_kept() {
        assert_eq!(chain_text("USDC", SYMBOL_CHARS), "USDC");
        assert_eq!(
            chain_text("ERC20: insufficient allowance", 300),
            "ERC20: insufficient allowance"
        );
    }

    #[test]
    fn controls_and_invisible_marks_are_removed() {
        assert_eq!(
            chain_text("\u{1b}[31mUSD\u{202E}C\0\0", SYMBOL_CHARS),
            "[31mUSDC"
        );
        assert_eq!(chain_text("a\n\n\tb  c\r\n", 300), "a b c");
        assert_eq!(chain_text("\u{200B}\u{FEFF}", 300), "");
        // Tag characters spell "hi" to a program and nothing to a person.
        assert_eq!(chain_text("OK\u{E0068}\u{E0069}\u{FE0F}", 300), "OK");
    }

    #[test]
    fn long_text_is_cut() {
        let long = "A".repeat(1000);
        let cut = chain_text(&long, SYMBOL_CHARS);
        assert_eq!(cut.chars().count(), SYMBOL_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(chain_text("ab cd", 4), "ab c…");
    }
}
