//! AWS credentials as every eg tier finds them, for the connections that reach AWS (a
//! dead-letter S3 connection, an SQS destination's connection): the keys configured for
//! the connection, else AWS's own chain — the environment, then the shared profile files
//! (which object_store does not read, see `settings::aws_profile`), then web identity,
//! container and instance credentials, which object_store follows.
//!
//! One place, so an S3 connection and an SQS connection configured alike sign in alike.

use crate::settings::{Secret, aws_profile};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsCredentialProvider};

/// The region when nothing names one, as AWS's SDKs default.
const DEFAULT_REGION: &str = "us-east-1";

/// A connection's own keys; an empty access key id means AWS's chain.
pub struct AwsKeys<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a Secret,
    pub session_token: &'a Secret,
}

/// An object_store AWS builder holding the connection's credentials and its region:
/// `region` when given, else the environment's (`AWS_REGION`, `AWS_DEFAULT_REGION`),
/// else the profile's, else us-east-1.
pub fn builder(keys: &AwsKeys<'_>, region: Option<&str>) -> AmazonS3Builder {
    let mut profile_region = None;
    let mut builder = if keys.access_key_id.is_empty() {
        let mut from_env = AmazonS3Builder::from_env();
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
            && let Some(profile) = aws_profile::from_files(|name| std::env::var(name).ok())
        {
            from_env = from_env
                .with_access_key_id(&profile.access_key_id)
                .with_secret_access_key(profile.secret_access_key.expose());
            if let Some(token) = &profile.session_token {
                from_env = from_env.with_token(token.expose());
            }
            profile_region = profile.region;
        }
        from_env
    } else {
        AmazonS3Builder::new()
            .with_access_key_id(keys.access_key_id)
            .with_secret_access_key(keys.secret_access_key.expose())
    };
    if !keys.session_token.is_empty() {
        builder = builder.with_token(keys.session_token.expose());
    }
    if let Some(region) = region {
        builder = builder.with_region(region);
    } else if builder.get_config_value(&AmazonS3ConfigKey::Region).is_none() {
        builder = builder.with_region(profile_region.as_deref().unwrap_or(DEFAULT_REGION));
    }
    builder
}

/// The region a [`builder`] holds.
pub fn region(builder: &AmazonS3Builder) -> String {
    builder
        .get_config_value(&AmazonS3ConfigKey::Region)
        .unwrap_or_else(|| DEFAULT_REGION.to_owned())
}

/// The credentials alone, for a service object_store has no client for (SQS): the
/// provider object_store's S3 client would sign with (refreshing temporary ones), and
/// the region. The bucket is never used; object_store only builds with one.
pub fn credentials(keys: &AwsKeys<'_>, region: Option<&str>) -> Result<(AwsCredentialProvider, String), String> {
    // object_store builds a reqwest client, which needs a crypto provider: ring, as
    // everywhere in eg. An error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = self::builder(keys, region);
    let region = self::region(&builder);
    let store = builder
        .with_bucket_name("unused")
        .build()
        .map_err(|e| format!("the AWS credentials cannot be used: {e}"))?;
    Ok((store.credentials().clone(), region))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_keys_and_region_win_over_the_environment() {
        let secret = Secret::new("s3cr3t");
        let keys = AwsKeys {
            access_key_id: "AKIDEXAMPLE",
            secret_access_key: &secret,
            session_token: &Secret::default(),
        };
        let built = builder(&keys, Some("eu-west-3"));
        assert_eq!(region(&built), "eu-west-3");
        assert_eq!(
            built.get_config_value(&AmazonS3ConfigKey::AccessKeyId).as_deref(),
            Some("AKIDEXAMPLE")
        );
        let (_, region) = credentials(&keys, None).unwrap();
        assert!(!region.is_empty());
    }
}
