//! system test harness
