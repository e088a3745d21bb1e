/// mimalloc rather than glibc's malloc: a watch that lives for days idles
/// near its heap in use (docs/performance/memory.md, *The watch's idle memory*).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kubefedctl::cli::main("kubefedctl")
}
