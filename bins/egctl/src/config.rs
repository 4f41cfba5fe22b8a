//! Where egctl finds eg-ingress and its admin token.
//!
//! Each setting comes from the first source that has it: command-line flags, then
//! the environment (`EGCTL_URL`, `EGCTL_TOKEN`, `EGCTL_TOKEN_FILE`), then the TOML
//! config file (`--config`, `EGCTL_CONFIG`, or `$XDG_CONFIG_HOME/egctl/config.toml`,
//! falling back to `~/.config/egctl/config.toml`), then the default URL. Within one
//! source a token beats a token file. The environment is passed in as a function so
//! the precedence is unit-tested without touching the process environment.

use crate::failure::Failure;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// The URL used when no source names one: `just up`'s and eg-ingress's default listener.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// The admin bearer token. Its `Debug` and `Display` never show it, so it cannot leak
/// into an error message or a log line by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// What the command line said about the target (all optional).
#[derive(Debug, Default, Clone)]
pub struct Flags {
    pub url: Option<String>,
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    /// `--config`: like `EGCTL_CONFIG`, a file named explicitly must exist.
    pub config: Option<PathBuf>,
}

/// The resolved target of every request.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub token: Token,
}

/// The config file's keys; unknown keys are refused so a typo does not silently fall
/// back to the default URL.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    url: Option<String>,
    token: Option<String>,
    token_file: Option<PathBuf>,
}

/// One source's settings and the name to blame when one of them is wrong.
struct Source {
    url: Option<(String, String)>,
    token: Option<(String, String)>,
    token_file: Option<(PathBuf, String)>,
}

/// Resolves the target from `flags`, the environment (`env`) and the config file.
pub fn resolve(flags: &Flags, env: &dyn Fn(&str) -> Option<String>) -> Result<Target, Failure> {
    // An empty variable counts as unset (`EGCTL_TOKEN= egctl …` switches it off).
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let named = flags.config.clone().or_else(|| var("EGCTL_CONFIG").map(PathBuf::from));
    let (file_path, explicit) = match named {
        Some(path) => (Some(path), true),
        None => (default_config_path(&var), false),
    };
    let file = match &file_path {
        Some(path) => read_config(path, explicit)?,
        None => FileConfig::default(),
    };
    let file_label = |key: &str| match &file_path {
        Some(path) => format!("{key} in {}", path.display()),
        None => key.to_owned(),
    };
    let file_dir = file_path.as_deref().and_then(Path::parent).map(Path::to_path_buf);
    let sources = [
        Source {
            url: flags.url.clone().map(|u| (u, "--url".to_owned())),
            token: flags.token.clone().map(|t| (t, "--token".to_owned())),
            token_file: flags.token_file.clone().map(|p| (p, "--token-file".to_owned())),
        },
        Source {
            url: var("EGCTL_URL").map(|u| (u, "EGCTL_URL".to_owned())),
            token: var("EGCTL_TOKEN").map(|t| (t, "EGCTL_TOKEN".to_owned())),
            token_file: var("EGCTL_TOKEN_FILE").map(|p| (PathBuf::from(p), "EGCTL_TOKEN_FILE".to_owned())),
        },
        Source {
            url: file.url.map(|u| (u, file_label("url"))),
            token: file.token.map(|t| (t, file_label("token"))),
            token_file: file.token_file.map(|p| {
                let p = expand_home(&p, &var);
                // A relative token file is relative to the config file, not to where
                // egctl happens to run.
                let p = match &file_dir {
                    Some(dir) if p.is_relative() => dir.join(p),
                    _ => p,
                };
                (p, file_label("token_file"))
            }),
        },
    ];

    let url = match sources.iter().find_map(|s| s.url.clone()) {
        Some((url, from)) => check_url(&url, &from)?,
        None => DEFAULT_URL.to_owned(),
    };
    let token = sources
        .iter()
        .find_map(|s| match (&s.token, &s.token_file) {
            (Some((token, from)), _) => Some(check_token(token.clone(), from)),
            (None, Some((path, from))) => Some(read_token_file(path, from)),
            (None, None) => None,
        })
        .unwrap_or_else(|| Err(missing_token(file_path.as_deref())))?;
    Ok(Target { url, token })
}

/// `$XDG_CONFIG_HOME/egctl/config.toml`, else `~/.config/egctl/config.toml`.
fn default_config_path(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(base.join("egctl").join("config.toml"))
}

fn read_config(path: &Path, explicit: bool) -> Result<FileConfig, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => return Ok(FileConfig::default()),
        Err(e) => {
            return Err(Failure::usage(format!(
                "cannot read config file {}: {e}",
                path.display()
            )));
        }
    };
    toml::from_str(&text).map_err(|e| {
        let detail = e.message().to_owned();
        Failure::usage(format!(
            "config file {}: {detail} (keys: url, token, token_file)",
            path.display()
        ))
    })
}

fn expand_home(path: &Path, var: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match (path.strip_prefix("~"), var("HOME")) {
        (Ok(rest), Some(home)) => Path::new(&home).join(rest),
        _ => path.to_path_buf(),
    }
}

fn check_url(raw: &str, from: &str) -> Result<String, Failure> {
    let raw = raw.trim();
    match url::Url::parse(raw) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(raw.to_owned()),
        _ => Err(Failure::usage(format!(
            "{from}: {raw:?} is not an http(s) URL such as {DEFAULT_URL}"
        ))),
    }
}

fn check_token(token: String, from: &str) -> Result<Token, Failure> {
    let token = token.trim().to_owned();
    if token.is_empty() {
        return Err(Failure::usage(format!("{from}: the admin token is empty")));
    }
    Ok(Token(token))
}

fn read_token_file(path: &Path, from: &str) -> Result<Token, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("{from}: cannot read token file {}: {e}", path.display())))?;
    check_token(text, &format!("{from} ({})", path.display()))
}

fn missing_token(config: Option<&Path>) -> Failure {
    let file = config.map_or_else(|| "a config file".to_owned(), |p| p.display().to_string());
    Failure::usage(format!(
        "no admin token: pass --token-file FILE (or --token), set EGCTL_TOKEN_FILE or EGCTL_TOKEN, \
         or put token_file = \"…\" in {file} (eg-ingress's EG__ADMIN__TOKEN; `just up` writes it to $EG_LOCAL_DIR/admin-token)"
    ))
}

/// A token for other modules' unit tests.
#[cfg(test)]
pub fn tests_token(value: &str) -> Token {
    Token(value.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |k| map.get(k).cloned()
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn flags_beat_env_beat_file_beat_default() {
        let dir = tempfile::tempdir().unwrap();
        let config = write(
            dir.path(),
            "c.toml",
            "url = \"http://file:1\"\ntoken = \"file-token\"\n",
        );
        let flags = Flags {
            config: Some(config.clone()),
            ..Flags::default()
        };
        let t = resolve(&flags, &env(&[])).unwrap();
        assert_eq!((t.url.as_str(), t.token.expose()), ("http://file:1", "file-token"));

        let e = env(&[("EGCTL_URL", "http://env:2"), ("EGCTL_TOKEN", "env-token")]);
        let t = resolve(&flags, &e).unwrap();
        assert_eq!((t.url.as_str(), t.token.expose()), ("http://env:2", "env-token"));

        let flags = Flags {
            url: Some("https://flag:3".into()),
            token: Some("flag-token".into()),
            ..flags
        };
        let t = resolve(&flags, &e).unwrap();
        assert_eq!((t.url.as_str(), t.token.expose()), ("https://flag:3", "flag-token"));

        let t = resolve(&Flags::default(), &env(&[("EGCTL_TOKEN", "x")])).unwrap();
        assert_eq!(t.url, DEFAULT_URL);
    }

    #[test]
    fn a_token_file_of_a_higher_source_beats_a_token_of_a_lower_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "token", "  from-file\n");
        let flags = Flags {
            token_file: Some(file.clone()),
            ..Flags::default()
        };
        let t = resolve(&flags, &env(&[("EGCTL_TOKEN", "env-token")])).unwrap();
        assert_eq!(t.token.expose(), "from-file");
        let e = env(&[("EGCTL_TOKEN_FILE", file.to_str().unwrap())]);
        assert_eq!(resolve(&Flags::default(), &e).unwrap().token.expose(), "from-file");
    }

    #[test]
    fn the_default_config_file_is_under_xdg_config_home_and_token_files_are_relative_to_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("egctl")).unwrap();
        write(&dir.path().join("egctl"), "config.toml", "token_file = \"tok\"\n");
        write(&dir.path().join("egctl"), "tok", "relative-token");
        let e = env(&[
            ("XDG_CONFIG_HOME", dir.path().to_str().unwrap()),
            ("HOME", "/nonexistent"),
        ]);
        assert_eq!(resolve(&Flags::default(), &e).unwrap().token.expose(), "relative-token");
    }

    #[test]
    fn a_missing_default_config_is_fine_but_a_named_one_is_not() {
        let e = env(&[("HOME", "/nonexistent"), ("EGCTL_TOKEN", "t")]);
        assert!(resolve(&Flags::default(), &e).is_ok());
        let flags = Flags {
            config: Some("/nonexistent/egctl.toml".into()),
            ..Flags::default()
        };
        let err = resolve(&flags, &e).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/egctl.toml"), "{err}");
        let e = env(&[("EGCTL_CONFIG", "/nonexistent/env.toml"), ("EGCTL_TOKEN", "t")]);
        let err = resolve(&Flags::default(), &e).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/env.toml"), "{err}");
    }

    #[test]
    fn refuses_unknown_config_keys_and_bad_urls() {
        let dir = tempfile::tempdir().unwrap();
        let config = write(dir.path(), "c.toml", "URL = \"http://x\"\n");
        let flags = Flags {
            config: Some(config),
            token: Some("t".into()),
            ..Flags::default()
        };
        let err = resolve(&flags, &env(&[])).unwrap_err().to_string();
        assert!(err.contains("URL"), "{err}");
        let flags = Flags {
            url: Some("127.0.0.1:8080".into()),
            token: Some("t".into()),
            ..Flags::default()
        };
        let err = resolve(&flags, &env(&[])).unwrap_err().to_string();
        assert!(err.starts_with("--url:"), "{err}");
    }

    #[test]
    fn a_missing_token_says_how_to_provide_one_and_tokens_never_print() {
        let err = resolve(&Flags::default(), &env(&[("HOME", "/h")])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(text.contains("--token-file") && text.contains("EGCTL_TOKEN"), "{text}");
        assert!(text.contains("/h/.config/egctl/config.toml"), "{text}");
        let t = resolve(&Flags::default(), &env(&[("EGCTL_TOKEN", "sekrit")])).unwrap();
        assert!(!format!("{t:?}").contains("sekrit"));
    }
}
