//! Stored text printed for a person: episode fields, strategies, dead letters. Much of it
//! comes from outside (an alert pasted verbatim, an LLM's reply, a raw event), and a terminal
//! obeys the control sequences in what it prints — an escape sequence in an alert could move
//! the cursor, erase lines or forge the fields printed around it. Human output goes through
//! [`safe`]; `--json` output needs nothing (serde_json escapes control characters).

use std::borrow::Cow;

/// `text` with every control character but newline and tab — C0 (ESC included), DEL, C1 —
/// and every bidirectional override shown escaped (`\u{1b}`), so it prints as it is stored
/// and does nothing else.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            shown.extend(c.escape_unicode());
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `println!` for text that may carry stored or outside input: prints it through [`safe`].
macro_rules! say {
    () => { println!() };
    ($($arg:tt)*) => { println!("{}", $crate::terminal::safe(&format!($($arg)*))) };
}
pub(crate) use say;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_overrides_print_escaped_and_the_rest_is_kept() {
        let alert = "[FIRING] 5xx\x1b[1A\x1b[2Kroot cause   forged\u{9b}2J \u{202E}txt.exe\u{7f}";
        assert_eq!(
            safe(alert),
            "[FIRING] 5xx\\u{1b}[1A\\u{1b}[2Kroot cause   forged\\u{9b}2J \\u{202e}txt.exe\\u{7f}"
        );
        let plain = "line one\n\tindented — é ✓";
        assert!(matches!(safe(plain), Cow::Borrowed(s) if s == plain));
    }
}
