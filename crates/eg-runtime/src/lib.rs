//! eg-runtime
