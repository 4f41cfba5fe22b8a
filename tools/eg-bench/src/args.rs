//! Command-line flags, hand-parsed (`--name value`, `--name=value`, or a bare `--name`
//! for a switch): a few flags per scenario do not justify another dependency to compile.
//! Each scenario takes the flags it knows with the typed getters; [`Flags::finish`]
//! refuses any left over, so a typo is an error rather than a silently ignored option.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, Default)]
pub struct Flags {
    values: BTreeMap<String, Option<String>>,
}

impl Flags {
    pub fn parse(argv: impl IntoIterator<Item = String>) -> anyhow::Result<Self> {
        let mut values = BTreeMap::new();
        let mut argv = argv.into_iter().peekable();
        while let Some(arg) = argv.next() {
            let name = match arg.as_str() {
                "-h" | "--help" => "help",
                other => other
                    .strip_prefix("--")
                    .with_context(|| format!("unexpected argument {other:?}"))?,
            };
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => {
                    let value = argv.next_if(|next| !next.starts_with("--"));
                    (name.to_owned(), value)
                }
            };
            if values.insert(name.clone(), value).is_some() {
                bail!("--{name} given twice");
            }
        }
        Ok(Self { values })
    }

    pub fn help(&self) -> bool {
        self.values.contains_key("help")
    }

    fn take(&mut self, name: &str) -> anyhow::Result<Option<String>> {
        match self.values.remove(name) {
            None => Ok(None),
            Some(Some(value)) => Ok(Some(value)),
            Some(None) => bail!("--{name} needs a value"),
        }
    }

    pub fn number<T>(&mut self, name: &str, default: T) -> anyhow::Result<T>
    where
        T: FromStr,
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        match self.take(name)? {
            None => Ok(default),
            Some(raw) => raw.parse().with_context(|| format!("--{name} {raw:?}")),
        }
    }

    /// A duration written like `2s`, `500ms`, `1m`.
    pub fn duration(&mut self, name: &str, default: Duration) -> anyhow::Result<Duration> {
        match self.take(name)? {
            None => Ok(default),
            Some(raw) => humantime::parse_duration(&raw).with_context(|| format!("--{name} {raw:?}")),
        }
    }

    pub fn text(&mut self, name: &str) -> anyhow::Result<Option<String>> {
        self.take(name)
    }

    pub fn path(&mut self, name: &str) -> anyhow::Result<Option<PathBuf>> {
        Ok(self.take(name)?.map(PathBuf::from))
    }

    pub fn switch(&mut self, name: &str) -> anyhow::Result<bool> {
        match self.values.remove(name) {
            None => Ok(false),
            Some(None) => Ok(true),
            Some(Some(value)) => bail!("--{name} takes no value (got {value:?})"),
        }
    }

    /// Fails on any flag the scenario did not take.
    pub fn finish(self) -> anyhow::Result<()> {
        match self.values.keys().next() {
            None => Ok(()),
            Some(name) => bail!("unknown option --{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> anyhow::Result<Flags> {
        Flags::parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn reads_values_switches_and_refuses_leftovers() -> anyhow::Result<()> {
        let mut f = flags(&["--backlog", "10", "--receiver-delay=250ms", "--keep", "--out", "x.json"])?;
        assert_eq!(f.number("backlog", 5usize)?, 10);
        assert_eq!(f.number("concurrency", 64usize)?, 64);
        assert_eq!(
            f.duration("receiver-delay", Duration::ZERO)?,
            Duration::from_millis(250)
        );
        assert!(f.switch("keep")?);
        assert_eq!(f.path("out")?, Some(PathBuf::from("x.json")));
        f.finish()?;

        let mut f = flags(&["--backlog", "many"])?;
        assert!(f.number("backlog", 5usize).is_err());
        assert!(flags(&["--backlog"])?.number("backlog", 5usize).is_err());
        assert!(flags(&["--typo", "1"])?.finish().is_err());
        assert!(flags(&["stray"]).is_err());
        assert!(flags(&["--a", "1", "--a", "2"]).is_err());
        assert!(flags(&["-h"])?.help());
        Ok(())
    }
}
