//! `corral generate-docs` (not in `--help`): the man pages and shell completions that
//! packages and `scripts/install.sh` install, made from the very clap
//! definitions `corral` parses with (cli.rs), so they cannot drift from
//! `--help`. scripts/layout.sh runs it; nobody needs it at run time.
//!
//! One page per command, as git does: corral(1), corral-run(1),
//! corral-service-ls(1)... Hidden commands get none, and `generate-docs`
//! is not in the command tree at all. The helper
//! programs corral-init, corral-shell, corral-sendmail and the script
//! corral-account-hook take no clap command line of their own; their pages
//! are described here.

use clap::{Arg, ArgAction, Command, CommandFactory};
use std::path::Path;

/// The `.TH` source and manual fields of every page.
const SOURCE: &str = concat!("corral ", env!("CARGO_PKG_VERSION"));
const MANUAL: &str = "corral manual";

/// Write `out/man1/*.1` and `out/completions/{corral.bash,_corral,corral.fish}`;
/// prints each file written.
pub fn generate(out: &Path) -> anyhow::Result<i32> {
    let man = out.join("man1");
    let completions = out.join("completions");
    for dir in [&man, &completions] {
        std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    }
    let mut written = Vec::new();
    let mut cli = crate::cli::Cli::command().disable_help_subcommand(true);
    cli.build();
    man_pages(&cli, &man, &mut written)?;
    for helper in helpers() {
        man_pages(&helper, &man, &mut written)?;
    }
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        let path = clap_complete::generate_to(shell, &mut cli, "corral", &completions)
            .map_err(|e| anyhow::anyhow!("{}: {shell} completions: {e}", completions.display()))?;
        written.push(path);
    }
    for p in &written {
        println!("{}", p.display());
    }
    Ok(0)
}

/// The page of `cmd` and, recursively, of each of its visible subcommands.
fn man_pages(
    cmd: &Command,
    dir: &Path,
    written: &mut Vec<std::path::PathBuf>,
) -> anyhow::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, dir, written)?;
    }
    let page = clap_mangen::Man::new(cmd.clone())
        .source(SOURCE)
        .manual(MANUAL);
    let path = page
        .generate_to(dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.join(page.get_filename()).display()))?;
    written.push(path);
    Ok(())
}

/// The helper programs, for their pages only: each parses its own command
/// line (or none), described here as clap commands for clap_mangen.
fn helpers() -> [Command; 4] {
    [
        Command::new("corral-init")
            .about("The init (pid 1) of a tenant's corral sandbox")
            .long_about(
                "corral-init is pid 1 inside every tenant sandbox: it builds the sandbox's root \
filesystem from the tenant's plan, holds its namespaces, reaps zombies and starts the processes \
corral asks for on a control socket that only the host can reach. `corral up` (and anything that \
brings a sandbox up: `corral run`, the gateway, logins) starts it with its sockets as fds 3 and 4; \
run by hand it refuses and exits with status 2. corral looks for it next to its own executable \
(or at $CORRAL_INIT).",
            )
            .after_help("See corral(1), corral-up(1), corral-down(1); docs/architecture.md."),
        Command::new("corral-shell")
            .about("Login shell that enters the user's corral sandbox")
            .long_about(
                "corral-shell, set as a tenant's login shell (usermod -s /usr/sbin/corral-shell \
USER), runs the tenant's real shell inside its sandbox and cgroup, with a pty of the sandbox's own \
for interactive logins: SSH sessions, `ssh host COMMAND`, scp and sftp all go through it. It is \
installed setuid root to enter the sandbox and drops every privilege before running anything. Who \
is caged is /etc/corral/access.toml; a caged user whose sandbox cannot be entered gets no session \
(fail closed). The PAM module pam_corral.so is the other way to the same result.",
            )
            .arg(
                Arg::new("login")
                    .short('l')
                    .action(ArgAction::SetTrue)
                    .help("A login shell (also when started as -corral-shell)"),
            )
            .arg(
                Arg::new("command")
                    .short('c')
                    .value_name("COMMAND")
                    .help("Run COMMAND with the tenant's shell, inside the sandbox"),
            )
            .arg(
                Arg::new("args")
                    .value_name("ARG")
                    .num_args(0..)
                    .help("Arguments of COMMAND ($0, $1...)"),
            )
            .after_help("See corral(1); docs/access.md."),
        Command::new("corral-sendmail")
            .about("sendmail for programs inside a corral sandbox")
            .long_about(
                "corral-sendmail is bound over the MTA's sendmail inside tenants' sandboxes (a \
ro-bind mount in the profile, docs/access.md). It takes the message and sendmail's usual \
arguments (-t, -i, -f...) and hands them to the host's `corral mail-broker` over \
/run/corral-mail/sendmail.sock, which sends the message as the tenant within its plan's \
mail.per_hour. Exit status: sendmail's (sysexits); 69 when the broker is not reachable.",
            )
            .arg(
                Arg::new("args")
                    .value_name("SENDMAIL-ARGUMENTS")
                    .num_args(0..)
                    .help("sendmail's arguments, e.g. -t -i"),
            )
            .after_help("See corral(1), corral-mail-broker(1); docs/access.md."),
        Command::new("corral-account-hook")
            .about("What corral does when a hosting panel deletes, suspends or unsuspends an account")
            .long_about(
                "corral-account-hook is one script for hosting panels' account events \
(DirectAdmin, cPanel, Plesk, WHMCS: where each calls it is in the script's header). `delete` runs \
`corral tenant remove USER`, `suspend` runs `corral suspend USER [--reason REASON]`, `unsuspend` \
runs `corral unsuspend USER`. Account creation needs no hook: a sandbox is built on first use. \
Exit status: corral's; 64 for a bad command line.",
            )
            .arg(
                Arg::new("action")
                    .value_name("ACTION")
                    .required(true)
                    .value_parser(["delete", "suspend", "unsuspend"])
                    .help("What happened to the account"),
            )
            .arg(Arg::new("user").value_name("USER").required(true).help("The account (Unix user)"))
            .arg(
                Arg::new("reason")
                    .value_name("REASON")
                    .num_args(0..)
                    .help("With suspend: why (shown to whoever is refused)"),
            )
            .after_help("See corral-tenant-remove(1), corral-suspend(1), corral-unsuspend(1); docs/operating.md."),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_page_per_visible_command_and_three_completions() {
        let out = tempfile::tempdir().unwrap();
        super::generate(out.path()).unwrap();
        let page = |n: &str| std::fs::read_to_string(out.path().join("man1").join(n));
        let corral = page("corral.1").unwrap();
        assert!(corral.contains(".TH corral 1"), "{corral}");
        assert!(
            corral.contains("corral\\-run(1)"),
            "subcommands listed: {corral}"
        );
        let run = page("corral-run.1").unwrap();
        assert!(run.contains("\\-\\-detach"), "{run}");
        assert!(run.contains(super::SOURCE), "{run}");
        for name in [
            "corral-service-ls.1",
            "corral-limits-set.1",
            "corral-shell.1",
            "corral-account-hook.1",
        ] {
            assert!(page(name).is_ok(), "{name} missing");
        }
        assert!(
            page("corral-generate-docs.1").is_err(),
            "hidden command has a page"
        );
        assert!(page("corral-help.1").is_err(), "help subcommand has a page");
        for f in ["corral.bash", "_corral", "corral.fish"] {
            let text = std::fs::read_to_string(out.path().join("completions").join(f)).unwrap();
            assert!(text.contains("mail-broker"), "{f}: the commands");
            assert!(text.contains("config-dir"), "{f}: the global options");
            assert!(
                !text.contains("generate-docs"),
                "{f}: completes generate-docs"
            );
        }
    }
}
