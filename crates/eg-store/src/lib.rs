//! eg-store
