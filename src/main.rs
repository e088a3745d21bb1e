fn main() -> std::process::ExitCode {
    kubefedctl::cli::main("kubefedctl")
}
