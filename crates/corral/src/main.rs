//! corral: the command-line front end. Each subcommand lives in `cmd/`.

mod cli;
mod cmd;
mod ctx;

use clap::Parser;

fn main() {
    // `corral run` (the hot path) is parsed on its own (see `cli::RunCli`).
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let (global, command) = if let Some(args) = cli::run_command_args(&argv) {
        let cli = cli::RunCli::parse_plain(&args, |v| std::env::var_os(v))
            .unwrap_or_else(|| cli::RunCli::parse_from(std::iter::once("corral run".into()).chain(args)));
        (cli.global, cli::Command::Run(cli.run))
    } else {
        let cli = cli::Cli::parse_from(std::iter::once("corral".into()).chain(argv));
        (cli.global, cli.command)
    };
    let ctx = ctx::Ctx::new(&global);
    let code = match cmd::dispatch(&ctx, command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("corral: {e:#}");
            ctx::EXIT_FAILURE
        }
    };
    std::process::exit(code);
}
