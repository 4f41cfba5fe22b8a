//! Events (behaviour.md#topics-and-publishing) in each input schema a topic may take: the
//! Event Grid schema, CloudEvents 1.0 in structured JSON mode, and a custom schema mapped
//! onto Event Grid's fields. Each schema validates one published event into an
//! [`AcceptedEvent`], its stored form. Reading a whole publish request (content type,
//! limits, all or nothing) is `crate::publish`'s job.

mod accepted;
pub mod cloudevents;
pub mod custom;
pub mod eventgrid;
pub mod raw;

pub use accepted::AcceptedEvent;
pub use custom::InputSchemaMapping;
pub use eventgrid::EventGridEvent;
