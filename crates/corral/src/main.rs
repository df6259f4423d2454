//! corral: the command-line front end. Each subcommand lives in `cmd/`.

mod cli;
mod cmd;
mod ctx;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let ctx = ctx::Ctx::new(&cli.global);
    let code = match cmd::dispatch(&ctx, cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("corral: {e:#}");
            ctx::EXIT_FAILURE
        }
    };
    std::process::exit(code);
}
