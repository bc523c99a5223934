//! Text read from a chain: token symbols, revert reasons, node and program messages. Anyone
//! can deploy a contract whose symbol or revert string says anything (a page of text, terminal
//! escapes, right-to-left overrides that make `evil` read as `live`, instructions to an
//! agent), so it is bounded and cleaned before it reaches an answer, a record or a log.

/// The most characters a token symbol keeps.
pub const SYMBOL_CHARS: usize = 32;

/// The most characters a chain's message (a revert reason, a node's refusal) keeps.
pub const MESSAGE_CHARS: usize = 300;

/// `raw` with control characters as spaces, invisible formatting characters (bidirectional
/// overrides, zero-width marks) dropped, runs of spaces collapsed, trimmed, and cut to
/// `max_chars` (ending in `…` when cut).
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

/// Unicode format characters that change how text around them is shown.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2069}'
        | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}'
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
