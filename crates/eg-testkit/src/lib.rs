//! eg-testkit
