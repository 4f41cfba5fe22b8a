//! The global allocator every tier runs on: mimalloc instead of the system allocator,
//! because allocation was a fifth of the sender's CPU under glibc's malloc
//! (docs/benchmarks.md). A tier declares it once at its crate root with
//! [`use_mimalloc!`](crate::use_mimalloc).

#[doc(hidden)]
pub use mimalloc::MiMalloc;

/// Makes mimalloc this binary's global allocator (see [`crate::allocator`] for why).
#[macro_export]
macro_rules! use_mimalloc {
    () => {
        #[global_allocator]
        static ALLOCATOR: $crate::allocator::MiMalloc = $crate::allocator::MiMalloc;
    };
}
