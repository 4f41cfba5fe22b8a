//! How hints name egctl's commands. Hints, egctl's own and those in the server's
//! messages (a failed validation's `` `egctl subscriptions validate orders audit` ``),
//! are written as `` `egctl …` ``. Under `just egctl` (the local deployment of `just up`)
//! the command to type is `just egctl …`: the justfile sets `EGCTL_HINT_PREFIX` to
//! `just egctl`, and every hint egctl prints for people is spelled with it. `--json`
//! output is the API's, as it came.

use std::borrow::Cow;

/// The variable naming how egctl is run, for its hints.
pub const PREFIX_VARIABLE: &str = "EGCTL_HINT_PREFIX";

/// How egctl is run, as hints should spell it.
pub struct Hints {
    /// `None`: plain `egctl`, nothing to respell.
    prefix: Option<String>,
}

impl Hints {
    /// From the value of [`PREFIX_VARIABLE`]; unset, empty or `egctl` change nothing.
    pub fn new(prefix: Option<String>) -> Self {
        let prefix = prefix
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty() && p != "egctl");
        Self { prefix }
    }

    /// `text` with each `` `egctl `` (a command quoted for the operator) spelled the way
    /// egctl is run.
    pub fn spell<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.prefix {
            Some(prefix) if text.contains("`egctl ") => Cow::Owned(text.replace("`egctl ", &format!("`{prefix} "))),
            _ => Cow::Borrowed(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_commands_are_spelled_as_egctl_is_run() {
        let hints = Hints::new(Some("just egctl".into()));
        assert_eq!(
            hints.spell("run `egctl subscriptions validate orders audit` again; egctl said so"),
            "run `just egctl subscriptions validate orders audit` again; egctl said so"
        );
        for plain in [None, Some(String::new()), Some("egctl".into())] {
            let text = "run `egctl status`";
            assert_eq!(Hints::new(plain).spell(text), text);
        }
    }
}
