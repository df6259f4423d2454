//! corral-cli: the full command-line front end (the `corral` program, src/front.rs,
//! execs it for every command line it does not answer itself). Each subcommand lives in `cmd/`.

mod cli;
mod cmd;
mod ctx;
mod metrics;
mod out;

use clap::Parser;

fn main() {
    // `corral run` (the hot path) in its plain forms is read without clap
    // (see `cli::RunCli::parse_plain`); everything else, as always, by clap.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if argv.first().is_some_and(|a| a == cli::GENERATE_DOCS) {
        let a = cli::GenerateDocsCli::parse_from(&argv);
        std::process::exit(match cmd::docs::generate(&a.out) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("corral: {}", out::error_line(&e));
                ctx::EXIT_FAILURE
            }
        });
    }
    let plain = cli::run_command_args(&argv)
        .and_then(|args| cli::RunCli::parse_plain(&args, |v| std::env::var_os(v)));
    let (global, command) = match plain {
        Some(run) => (run.global, cli::Command::Run(run.run)),
        None => {
            let cli = cli::Cli::parse();
            (cli.global, cli.command)
        }
    };
    let ctx = ctx::Ctx::new(&global);
    let code = match cmd::dispatch(&ctx, command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("corral: {}", out::error_line(&e));
            let suspended = e.chain().any(|c| {
                c.downcast_ref::<corral_profile::suspend::Suspended>()
                    .is_some()
            });
            if suspended {
                corral_profile::suspend::EXIT_SUSPENDED
            } else {
                ctx::EXIT_FAILURE
            }
        }
    };
    std::process::exit(code);
}
