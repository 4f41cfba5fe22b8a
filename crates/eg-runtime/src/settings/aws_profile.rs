//! The AWS shared configuration files' static credentials, for an S3 connection
//! configured without keys: the profile named by `AWS_PROFILE` (else `default`) in
//! `~/.aws/credentials` (`AWS_SHARED_CREDENTIALS_FILE`) and `~/.aws/config`
//! (`AWS_CONFIG_FILE`), as the AWS CLI and SDKs read them. `object_store` follows the
//! rest of AWS's chain (environment variables, web identity, container and instance
//! credentials) but not these files. Profiles that sign in another way (SSO,
//! `role_arn`, `credential_process`) are not followed: give them keys in the
//! environment, or run with a role.

use super::storage::Secret;
use std::path::PathBuf;

/// A profile's keys (and region, from the config file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileCredentials {
    pub profile: String,
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
    pub region: Option<String>,
}

/// The credentials of the profile the environment names, when its files give it keys.
/// `env` reads an environment variable (`std::env::var(..).ok()` in the tiers).
pub fn from_files(env: impl Fn(&str) -> Option<String>) -> Option<ProfileCredentials> {
    let home = env("HOME").map(PathBuf::from);
    let path = |variable: &str, file: &str| {
        env(variable)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(file)))
    };
    let read = |p: Option<PathBuf>| p.and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    let credentials = read(path("AWS_SHARED_CREDENTIALS_FILE", "credentials"));
    let config = read(path("AWS_CONFIG_FILE", "config"));
    let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
    from_text(&credentials, &config, &profile)
}

/// `profile`'s keys from the two files' text: the credentials file's `[name]` section
/// first, then the config file's `[profile name]` (`[default]` for the default).
pub fn from_text(credentials: &str, config: &str, profile: &str) -> Option<ProfileCredentials> {
    let config_section = if profile == "default" {
        "default".to_owned()
    } else {
        format!("profile {profile}")
    };
    let from_credentials = section(credentials, profile);
    let from_config = section(config, &config_section);
    let get = |key: &str| {
        from_credentials
            .iter()
            .chain(from_config.iter())
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    Some(ProfileCredentials {
        profile: profile.to_owned(),
        access_key_id: get("aws_access_key_id")?,
        secret_access_key: Secret::new(get("aws_secret_access_key")?),
        session_token: get("aws_session_token").map(Secret::new),
        region: from_config.iter().find(|(k, _)| k == "region").map(|(_, v)| v.clone()),
    })
}

/// The `key = value` lines of `[name]` in an INI text (keys lower-cased, `#`/`;` comments
/// skipped).
fn section(text: &str, name: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut pairs = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = header.trim() == name;
            continue;
        }
        if inside && let Some((key, value)) = line.split_once('=') {
            pairs.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREDENTIALS: &str = "
# written by aws configure
[default]
aws_access_key_id = AKIADEFAULT
aws_secret_access_key = secret/default+key

[deadletters]
aws_access_key_id=AKIADEAD
aws_secret_access_key=dead-secret
aws_session_token = token==
";
    const CONFIG: &str = "
[default]
region = eu-west-1

[profile deadletters]
region = us-east-2

[profile keys-in-config]
aws_access_key_id = AKIACONFIG
aws_secret_access_key = config-secret
";

    #[test]
    fn reads_the_default_and_named_profiles_as_the_aws_cli_does() {
        let default = from_text(CREDENTIALS, CONFIG, "default").unwrap();
        assert_eq!(default.access_key_id, "AKIADEFAULT");
        assert_eq!(default.secret_access_key.expose(), "secret/default+key");
        assert_eq!(default.region.as_deref(), Some("eu-west-1"));
        let named = from_text(CREDENTIALS, CONFIG, "deadletters").unwrap();
        assert_eq!(named.access_key_id, "AKIADEAD");
        assert_eq!(named.session_token.as_ref().map(Secret::expose), Some("token=="));
        assert_eq!(named.region.as_deref(), Some("us-east-2"));
        let in_config = from_text("", CONFIG, "keys-in-config").unwrap();
        assert_eq!(in_config.access_key_id, "AKIACONFIG");
        assert!(!format!("{named:?}").contains("dead-secret"), "never printed");
    }

    #[test]
    fn a_profile_without_keys_gives_none() {
        assert_eq!(from_text(CREDENTIALS, CONFIG, "missing"), None);
        assert_eq!(from_text("[sso]\nsso_start_url = https://x\n", "", "sso"), None);
    }

    #[test]
    fn the_files_are_found_where_the_environment_says() {
        let dir = std::env::temp_dir().join(format!("eg-aws-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join(".aws")).unwrap();
        std::fs::write(dir.join(".aws/credentials"), CREDENTIALS).unwrap();
        let home = dir.display().to_string();
        let env = |profile: Option<&'static str>| {
            let home = home.clone();
            move |name: &str| match name {
                "HOME" => Some(home.clone()),
                "AWS_PROFILE" => profile.map(str::to_owned),
                _ => None,
            }
        };
        assert_eq!(from_files(env(None)).unwrap().access_key_id, "AKIADEFAULT");
        assert_eq!(from_files(env(Some("deadletters"))).unwrap().access_key_id, "AKIADEAD");
        let _ = std::fs::remove_dir_all(dir);
    }
}
