//! The `airlock` binary's library: the command line and the HTTP server.

/// mimalloc instead of the system allocator for everything linked with this crate (the binary,
/// its tests and benches). A request allocates and frees many small buffers on several threads;
/// glibc's malloc spent 12–13 % of the MCP endpoint benchmark's CPU in allocation and, by
/// returning memory to the kernel and faulting it back, 6 % more in clearing fresh pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod boot;
pub mod cli;
pub mod http;
pub mod result;
pub mod telemetry;
