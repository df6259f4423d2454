//! corral: the command-line front end. Each subcommand lives in `cmd/`.

mod cli;
mod cmd;
mod ctx;

use clap::Parser;

fn main() {
    // `corral run` (the hot path) is parsed on its own (see `cli::RunCli`).
    let (global, command) = if std::env::args_os().nth(1).is_some_and(|a| a == "run") {
        let argv = std::iter::once("corral run".into()).chain(std::env::args_os().skip(2));
        let cli = cli::RunCli::parse_from::<_, std::ffi::OsString>(argv);
        (cli.global, cli::Command::Run(cli.run))
    } else {
        let cli = cli::Cli::parse();
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
