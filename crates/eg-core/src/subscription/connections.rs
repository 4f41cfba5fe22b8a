//! The accounts and connections eg's configuration names, as far as the management API
//! checks subscriptions against them: a subscription names an account or a connection,
//! and only the configuration holds where it is and its keys.

/// What eg's configuration says about the accounts and connections a subscription may
/// name (object stores for dead letters, queues and brokers for deliveries); the
/// management API checks each new subscription against it.
pub trait NamedConnections {
    /// Whether an Azure storage account of this name is configured.
    fn has_azure_account(&self, account: &str) -> bool;
    /// The S3 connection of this name, when configured.
    fn s3_connection(&self, name: &str) -> Option<S3ConnectionFacts<'_>>;
    /// Whether a RabbitMQ connection of this name is configured.
    fn has_rabbitmq_connection(&self, name: &str) -> bool;
    /// Whether a NATS connection of this name is configured.
    fn has_nats_connection(&self, name: &str) -> bool;
}

/// What a subscription may be checked against about an S3 connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct S3ConnectionFacts<'a> {
    /// `None`: AWS itself.
    pub endpoint_url: Option<&'a str>,
    /// `None`: the subscription's, or the AWS environment's.
    pub region: Option<&'a str>,
}
