//! The one way ruda reads a switch from the environment (`RUDA_SOFTMAX=off`,
//! `RUDA_MATMUL_TF32=0`, ...), so that every variable accepts the same words.

/// The words that turn any of ruda's switches off, compared trimmed and case-insensitively.
pub const OFF_WORDS: [&str; 4] = ["off", "0", "false", "no"];

/// Whether `value` (a variable's value; `None` when unset) turns its switch off: one of
/// [`OFF_WORDS`], or of `also_off`, the names of what runs instead (`burn` for Burn's own
/// operation), trimmed and case-insensitive. Anything else, unset or empty leaves it on.
pub fn is_off(value: Option<&str>, also_off: &[&str]) -> bool {
    value.is_some_and(|value| {
        let value = value.trim().to_ascii_lowercase();
        OFF_WORDS.contains(&value.as_str())
            || also_off
                .iter()
                .any(|word| word.eq_ignore_ascii_case(&value))
    })
}

/// Whether the variable `name` leaves its switch on (see [`is_off`]).
pub fn switch_on(name: &str, also_off: &[&str]) -> bool {
    !is_off(std::env::var(name).ok().as_deref(), also_off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_words_and_alternatives_turn_a_switch_off_whatever_their_case_and_spaces() {
        for value in ["off", " OFF ", "0", "False", "no", "burn", " Burn "] {
            assert!(is_off(Some(value), &["burn"]), "{value:?}");
        }
        assert!(is_off(Some("CubeCL"), &["cubecl", "burn"]));
    }

    #[test]
    fn unset_empty_and_other_values_leave_a_switch_on() {
        for value in [
            None,
            Some(""),
            Some("  "),
            Some("on"),
            Some("1"),
            Some("native"),
        ] {
            assert!(!is_off(value, &["burn"]), "{value:?}");
        }
        assert!(
            !is_off(Some("burn"), &[]),
            "`burn` is an off word only where it is named"
        );
    }
}
