//! Topic and subscription names: validated once, compared case-insensitively (as
//! Event Grid does), displayed as the user spelled them.

use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! resource_name {
    ($name:ident, $what:literal, $min:literal, $max:literal) => {
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(raw: &str) -> Result<Self, InvalidField> {
                let len = raw.chars().count();
                if !($min..=$max).contains(&len) {
                    return Err(InvalidField::new(
                        "name",
                        format!(
                            concat!($what, " name must be {}-{} characters, got {}"),
                            $min, $max, len
                        ),
                    ));
                }
                if let Some(bad) = raw.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-')) {
                    return Err(InvalidField::new(
                        "name",
                        format!(
                            concat!($what, " name may hold only letters, digits and '-', found {:?}"),
                            bad
                        ),
                    ));
                }
                Ok(Self(raw.to_owned()))
            }

            /// The case-folded form that identifies the resource.
            pub fn key(&self) -> String {
                self.0.to_ascii_lowercase()
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.0.eq_ignore_ascii_case(&other.0)
            }
        }
        impl Eq for $name {}

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.key().hash(state)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidField;
            fn try_from(raw: String) -> Result<Self, Self::Error> {
                Self::parse(&raw)
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.0
            }
        }
    };
}

resource_name!(TopicName, "topic", 3, 50);
resource_name!(SubscriptionName, "subscription", 3, 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_letters_digits_and_hyphens() {
        assert!(TopicName::parse("orders-2").is_ok());
        assert!(SubscriptionName::parse(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn refuses_bad_lengths_and_characters() {
        assert!(TopicName::parse("ab").is_err());
        assert!(TopicName::parse(&"a".repeat(51)).is_err());
        let err = TopicName::parse("a_b_c").unwrap_err();
        assert!(err.problem.contains("'_'"), "{err}");
        assert!(TopicName::parse("../etc").is_err());
    }

    #[test]
    fn compares_case_insensitively() {
        assert_eq!(TopicName::parse("Orders").unwrap(), TopicName::parse("orders").unwrap());
        assert_eq!(TopicName::parse("Orders").unwrap().key(), "orders");
    }
}
