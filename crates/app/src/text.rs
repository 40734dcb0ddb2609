//! Saying a user's text safely: in logs, only its length and the scripts it is written in (a
//! query that failed may be private); on a terminal, with its control characters escaped (a file
//! named `ESC[2J.pdf` must not clear the screen, a right-to-left override must not disguise
//! `exe.pdf` as `fdp.exe`).

/// The script of a character, by Unicode block: coarse, but enough to tell which writing system a
/// failing input was in. Digits, punctuation and spaces belong to none.
pub fn script(c: char) -> Option<&'static str> {
    let script = match c as u32 {
        _ if !c.is_alphabetic() && !matches!(c as u32, 0x1f300..=0x1faff | 0x2600..=0x27bf) => return None,
        0x0000..=0x024f | 0x1e00..=0x1eff | 0xfb00..=0xfb06 => "Latin",
        0x0370..=0x03ff | 0x1f00..=0x1fff => "Greek",
        0x0400..=0x052f => "Cyrillic",
        0x0530..=0x058f => "Armenian",
        0x0590..=0x05ff | 0xfb1d..=0xfb4f => "Hebrew",
        0x0600..=0x06ff | 0x0750..=0x077f | 0xfb50..=0xfdff | 0xfe70..=0xfeff => "Arabic",
        0x0900..=0x097f => "Devanagari",
        0x0980..=0x0dff => "Indic",
        0x0e00..=0x0e7f => "Thai",
        0x10a0..=0x10ff => "Georgian",
        0x1100..=0x11ff | 0x3130..=0x318f | 0xac00..=0xd7af => "Hangul",
        0x3040..=0x30ff | 0x31f0..=0x31ff | 0xff66..=0xff9f => "Kana",
        0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xf900..=0xfaff | 0x20000..=0x3134f => "Han",
        0x1f300..=0x1faff | 0x2600..=0x27bf => "emoji",
        _ => "other",
    };
    Some(script)
}

/// "N characters, scripts: A, B" (scripts in order of first appearance), or "N characters" when
/// none has letters.
pub fn profile(text: &str) -> String {
    let mut scripts: Vec<&str> = Vec::new();
    for name in text.chars().filter_map(script) {
        if !scripts.contains(&name) {
            scripts.push(name);
        }
    }
    let count = text.chars().count();
    if scripts.is_empty() {
        format!("{count} characters")
    } else {
        format!("{count} characters, scripts: {}", scripts.join(", "))
    }
}

/// Unicode's bidirectional controls: marks, embeddings, overrides and isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` for a terminal: control characters (C0, DEL, C1: escape sequences, carriage returns,
/// backspaces, line breaks in a name) and bidirectional controls written as `\u{..}`; everything
/// else, every script and emoji, as it is. A text needing no escape is borrowed.
pub fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || is_bidi_control(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() || is_bidi_control(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_names_length_and_scripts_and_never_the_words() {
        assert_eq!(profile("charges\u{a0}locatives\u{a0}?"), "19 characters, scripts: Latin");
        assert_eq!(profile("東京の人口 Москва"), "12 characters, scripts: Han, Kana, Cyrillic");
        assert_eq!(profile("12 345"), "6 characters");
        assert_eq!(profile("👍 שלום"), "6 characters, scripts: emoji, Hebrew");
    }

    #[test]
    fn terminal_text_escapes_control_and_direction_characters_only() {
        assert_eq!(for_terminal("\u{1b}[2Jreport.pdf"), "\\u{1b}[2Jreport.pdf");
        assert_eq!(for_terminal("invoice\u{202e}fdp.exe"), "invoice\\u{202e}fdp.exe");
        assert_eq!(for_terminal("line\nbreak\r"), "line\\u{a}break\\u{d}");
        assert!(matches!(for_terminal("Größe 東京 👩\u{200d}👩\u{200d}👧 1\u{202f}234"), std::borrow::Cow::Borrowed(_)));
    }

    proptest::proptest! {
        #![proptest_config(warpfold_testkit::cases(10_000))]

        /// Whatever a file name or a snippet holds, what reaches the terminal has no control or
        /// direction character, and text without them is unchanged.
        #[test]
        fn terminal_text_of_any_input_holds_no_control_character(text in warpfold_testkit::text(40), control in 0u32..0xa0) {
            let mut text = text;
            if let Some(c) = char::from_u32(control) {
                text.insert(0, c);
            }
            let shown = for_terminal(&text);
            proptest::prop_assert!(!shown.chars().any(|c| c.is_control() || is_bidi_control(c)), "{shown:?}");
            if !text.chars().any(|c| c.is_control() || is_bidi_control(c)) {
                proptest::prop_assert_eq!(&*shown, text.as_str());
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(warpfold_testkit::cases(10_000))]
        #[test]
        fn a_profile_of_any_text_holds_none_of_its_letters(text in warpfold_testkit::text(40)) {
            let said = profile(&text);
            let length = format!("{} characters", text.chars().count());
            proptest::prop_assert!(said.starts_with(&length), "{said}");
            let allowed = "0123456789 characters,scripts:LatinGreekCyrillicArmenianHebrewArabicDevanagariIndicThaiGeorgianHangulKanaHanemojiother";
            proptest::prop_assert!(said.chars().all(|c| allowed.contains(c)), "{said}");
        }
    }
}
