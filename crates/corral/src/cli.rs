//! Command-line interface (clap). Every command accepts the global options.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "corral",
    version,
    about = "Persisted per-tenant sandboxes for shared web hosting",
    long_about = "corral gives every tenant (by default a Unix user) a sandbox built once from a profile \
template: mount, pid, ipc, uts and cgroup namespaces (optionally net and user) held by a tiny per-tenant \
init, plus cgroup limits. Later processes join it in constant time.\n\n\
Typical use:\n  corral up alice                 build alice's sandbox (idempotent)\n  \
corral run alice -- php -v      run a command inside it (brings it up if needed)\n  \
corral ls                       list sandboxes\n  corral down alice               stop it and remove its state",
    after_help = "Files: the profile template is <config-dir>/profile.toml (built-in default if absent), \
per-tenant overrides <config-dir>/tenants/NAME.toml, plans <config-dir>/plans/NAME.toml. \
`corral profile default` prints the built-in template with comments."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

const RUN_AFTER_HELP: &str = "Exit status: the command's own; 128+N if it was killed by signal N; \
75 if the tenant's entry-process limit is reached; 125 if corral itself failed; 126/127 if the \
command could not be executed / was not found.";

/// A `corral run` command line: the global options and the `run` ones.
#[derive(Debug, PartialEq)]
pub struct RunCli {
    pub global: Global,
    pub run: RunArgs,
}

impl RunCli {
    /// `corral run`'s arguments in their plain forms, without clap
    /// ([`corral::runline::RunLine::parse`], which the lean `corral` front
    /// program uses too); `None` for anything else, which clap answers.
    /// The unit test checks that every `Some` equals clap's parse.
    pub fn parse_plain(
        args: &[std::ffi::OsString],
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Option<RunCli> {
        use std::os::unix::ffi::OsStringExt;
        let l = RunLine::parse(&utf8(args)?, |v| env(v).map(|o| o.into_vec()))?;
        Some(RunCli {
            global: Global {
                config_dir: l.config_dir.into(),
                state_dir: l.state_dir.into(),
                cgroup_parent: l.cgroup_parent,
                json: l.json,
            },
            run: RunArgs {
                tenant: l.tenant,
                cwd: l.cwd,
                env: l.env,
                preserve_fds: l.preserve_fds,
                detach: l.detach,
                log: l.log.map(Into::into),
                command: l.command,
            },
        })
    }
}

/// [`corral::runline::run_command_args`] for the process's arguments
/// (`None` if one is not UTF-8: clap answers).
pub fn run_command_args(args: &[std::ffi::OsString]) -> Option<Vec<std::ffi::OsString>> {
    let args = corral::runline::run_command_args(&utf8(args)?)?;
    Some(args.into_iter().map(Into::into).collect())
}

fn utf8(args: &[std::ffi::OsString]) -> Option<Vec<&str>> {
    args.iter().map(|a| a.to_str()).collect()
}

pub use corral::runline::{RunLine, DEFAULT_CGROUP_PARENT, DEFAULT_CONFIG_DIR, DEFAULT_STATE_DIR};

#[derive(Args, Debug, Clone, PartialEq)]
pub struct Global {
    /// Configuration directory (profile.toml, tenants/, plans/).
    #[arg(long, global = true, env = "CORRAL_CONFIG_DIR", default_value = DEFAULT_CONFIG_DIR)]
    pub config_dir: PathBuf,
    /// State directory (one subdirectory per running sandbox).
    #[arg(long, global = true, env = "CORRAL_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// cgroup parent below the cgroup root that holds every tenant's cgroup.
    #[arg(long, global = true, env = "CORRAL_CGROUP_PARENT", default_value = DEFAULT_CGROUP_PARENT)]
    pub cgroup_parent: String,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build a tenant's sandbox (does nothing if it is already up).
    Up(TenantsArg),
    /// Run a command inside a tenant's sandbox (brings it up first if needed).
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
    /// Stop a tenant's sandbox: kill everything in it, remove its state and cgroup.
    Down(DownArgs),
    /// Take a sandbox down and build it again (e.g. after changing the profile).
    Restart(TenantsArg),
    /// List sandboxes with their init pid, age and whether the profile changed since; warns
    /// (stderr; `--json`: skipped_binds) about -try binds a sandbox lacks: the source is missing,
    /// or appeared after it was built (`corral restart` binds it).
    Ls,
    /// Validate a profile template (default: the configured one, with access.toml, gateway.toml
    /// and network.toml when present) or a tenant's effective profile; warns (stderr,
    /// FILE:LINE:COL) about -try binds whose source is missing, which `up` skips, about
    /// `net = "host"`, and about the tenants' firewall table when a firewall reload removed it.
    Check(CheckArgs),
    /// Print profiles.
    #[command(subcommand)]
    Profile(ProfileCmd),
    /// Show a tenant's limits, change them (saved in its override file, applied live), or re-read plans.
    #[command(subcommand)]
    Limits(LimitsCmd),
    /// Choose a tenant's limits plan (saved in its override file, applied live).
    #[command(subcommand)]
    Plan(PlanCmd),
    /// Suspend a tenant: its processes stop, every way in refuses (exit 77, gateway 503), until unsuspended.
    #[command(after_help = SUSPEND_AFTER_HELP)]
    Suspend(SuspendArgs),
    /// Resume a suspended tenant: its stopped processes continue, every way in works again.
    Unsuspend(UnsuspendArgs),
    /// Account lifecycle for hosting panels' hooks (config/hooks/): remove a tenant's corral state.
    #[command(subcommand)]
    Tenant(TenantCmd),
    /// Delete what has not been modified for DAYS days in tenants' disk /tmp (all, or those named),
    /// as each tenant (like CageFS's tmpwatch); e.g. from cron: `corral tmp-clean --older-than 7`.
    TmpClean {
        tenants: Vec<String>,
        /// Age in days (by modification time).
        #[arg(long, value_name = "DAYS", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=3650))]
        older_than: u32,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove what corral keeps of accounts that no longer exist (state, /tmp, overrides, records, logs).
    Gc {
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// One-shot usage and fault counters per tenant (CPU %, memory, processes, IO, entry processes).
    Stats(StatsArgs),
    /// Live, refreshing usage per tenant, sortable (like lvetop).
    Top(TopArgs),
    /// FastCGI gateway: run CGI scripts inside their tenant's sandbox (replaces fcgiwrap behind nginx).
    Gateway(crate::cmd::gateway::GatewayArgs),
    /// CGI wrapper for servers without FastCGI: run the requested script inside its tenant's sandbox.
    Cgi(crate::cmd::cgi::CgiArgs),
    /// Mail broker: take tenants' messages from corral-sendmail in their sandboxes and hand them to the
    /// host's MTA as the tenant, within the plan's mail.per_hour (docs/access.md).
    MailBroker(crate::cmd::mail::MailBrokerArgs),
    /// Supervised services of tenants ([services.NAME] in the profile): PHP-FPM pools and other
    /// long-running programs, started on demand through their sockets (docs/access.md).
    #[command(subcommand, after_help = SERVICE_AFTER_HELP)]
    Service(ServiceCmd),
    /// Prometheus metrics of every tenant (usage, limits, fault counters): serve them over HTTP
    /// for scraping, or print them once (docs/metrics.md).
    #[command(subcommand, after_help = crate::cmd::metrics::METRICS_AFTER_HELP)]
    Metrics(crate::cmd::metrics::MetricsCmd),
    /// Usage history collector: samples every tenant's usage and faults every few seconds into
    /// the history database, rolls up, keeps 60 days, snapshots processes at faults, sends alerts.
    #[command(after_help = crate::cmd::history::DAEMON_AFTER_HELP)]
    Daemon(crate::cmd::history::DaemonArgs),
    /// Usage history (like lveinfo): usage against limits, tenants that hit limits (--by-fault) or
    /// came near them (--by-usage), a tenant's charts (--html) and process snapshots.
    #[command(after_help = crate::cmd::history::HISTORY_AFTER_HELP)]
    History(crate::cmd::history::HistoryArgs),
}

/// `corral generate-docs --out DIR`: writes the man pages and shell
/// completions (for packaging: scripts/layout.sh). Not in [`Command`], so
/// that neither `--help`, the pages nor the completions (clap_complete
/// completes hidden commands too) offer it; `main` reads it before clap.
#[derive(Parser, Debug)]
#[command(
    name = "corral generate-docs",
    about = "Write corral's man pages and shell completions (for packaging)"
)]
pub struct GenerateDocsCli {
    /// Output directory: man1/*.1 and completions/ (corral.bash, _corral, corral.fish).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The subcommand word of [`GenerateDocsCli`].
pub const GENERATE_DOCS: &str = "generate-docs";

const SERVICE_AFTER_HELP: &str = "Examples:
  corral service ls                      every service of every running tenant
  corral service status alice php --json
  corral service restart alice php       after editing the pool; returns once it is back
  corral service logs alice php -n 100 -f
A profile declares services as [services.NAME]; config/services-php-fpm.toml is a complete PHP-FPM pool.";

#[derive(Subcommand, Debug)]
pub enum ServiceCmd {
    /// Services of running tenants (or of the named ones, up or not): state, pid, workers, restarts, sockets.
    Ls {
        /// Tenants (default: every running one).
        tenants: Vec<String>,
    },
    /// Details of a tenant's services (or of one).
    Status {
        /// Tenant (Unix user name).
        tenant: String,
        /// Service name ([services.NAME]); default: every service of the tenant.
        name: Option<String>,
    },
    /// Start a tenant's services (or one) now, bringing the sandbox up if needed.
    Start {
        /// Tenant (Unix user name).
        tenant: String,
        /// Service name ([services.NAME]); default: every service of the tenant.
        name: Option<String>,
    },
    /// Stop a tenant's services (or one): the stop signal, then SIGKILL after the stop timeout. An
    /// on-demand service starts again on the next connection to its socket.
    Stop {
        /// Tenant (Unix user name).
        tenant: String,
        /// Service name ([services.NAME]); default: every service of the tenant.
        name: Option<String>,
    },
    /// Stop and start again (e.g. after changing the service's own configuration file).
    Restart {
        /// Tenant (Unix user name).
        tenant: String,
        /// Service name ([services.NAME]); default: every service of the tenant.
        name: Option<String>,
    },
    /// Print the end of a service's log (timestamped output and what corral did).
    Logs {
        /// Tenant (Unix user name).
        tenant: String,
        /// Service name.
        name: String,
        /// How many lines.
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: usize,
        /// Keep printing what is appended (across rotations), until interrupted.
        #[arg(short, long)]
        follow: bool,
    },
    /// Bring up every tenant whose profile declares services (run at boot by
    /// corral-services.service or config/corral-boot).
    Boot {
        /// Only list the tenants that would be brought up.
        #[arg(long)]
        dry_run: bool,
    },
}

const SUSPEND_AFTER_HELP: &str = "The suspension is recorded in /etc/corral/suspended/TENANT.json, so it holds \
across restarts and reboots. A running sandbox stays up: its init stops every process in it (SIGSTOP) and \
starts none until `corral unsuspend`, which continues them (SIGCONT). Meanwhile `corral run`, `up`, `restart` \
and `service start` exit with 77 and the reason, the gateway answers 503 (--suspended-page), and SSH, SFTP, \
cron and su logins are refused.

Examples:
  corral suspend alice --reason \"invoice 2026-118 unpaid\"
  corral unsuspend alice";

#[derive(Args, Debug)]
pub struct SuspendArgs {
    pub tenant: String,
    /// Why (shown to whoever is refused, and in the record).
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum TenantCmd {
    /// The account is being deleted: take its sandbox down and delete what corral keeps of it (its
    /// state and cgroup, disk /tmp, override file, suspension record, services' log directory), and
    /// nothing else. Works before or after the Unix account is deleted.
    Remove {
        tenant: String,
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Args, Debug)]
pub struct UnsuspendArgs {
    pub tenant: String,
}

#[derive(Subcommand, Debug)]
pub enum PlanCmd {
    /// Give TENANT the limits plan PLAN (/etc/corral/plans/PLAN.toml): `plan = "PLAN"` in its
    /// override file; applied at once if it is up.
    Set { tenant: String, plan: String },
}

#[derive(Subcommand, Debug)]
pub enum LimitsCmd {
    /// Effective limits (of the running sandbox, else from the profile and plan).
    Show { tenant: String },
    /// Change a tenant's limits, e.g. `cpu=50% memory.max=512M processes=200`: saved in its override
    /// file (tenants/TENANT.toml) and applied at once if it is up.
    #[command(
        after_help = "Keys: cpu cpu.weight memory.max memory.high memory.swap_max processes io.read_bps io.write_bps \
io.read_iops io.write_iops entry_processes mail.per_hour rlimits.nofile rlimits.core rlimits.cpu rlimits.as. \
Values: 50%, 512M, 1G, a number, or max.

Every assignment and the tenant's resulting limits are checked before anything changes (e.g. entry_processes \
above processes is refused). The change is written into /etc/corral/tenants/TENANT.toml (only those keys: the \
rest of the file and its comments stay as they were), so it survives restart, rebuild and reboot, then the \
tenant's whole effective limits are applied to its running sandbox. A tenant that is not up can be changed too.
With --runtime the change goes only to the running sandbox and lasts until it is rebuilt.

Examples:
  corral limits set alice cpu=150% memory.max=2G
  corral limits set alice processes=300 --runtime    # until the next restart"
    )]
    Set {
        tenant: String,
        #[arg(required = true, value_name = "KEY=VALUE")]
        assignments: Vec<String>,
        /// Change the running sandbox only (not saved; gone after `corral restart`).
        #[arg(long)]
        runtime: bool,
    },
    /// Re-read profiles and plans and apply them to running tenants (all if none named).
    Reload { tenants: Vec<String> },
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Only this tenant (default: every running tenant).
    pub tenant: Option<String>,
    /// Sampling window for rates (CPU %, IO/s), in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub interval_ms: u64,
}

#[derive(Args, Debug)]
pub struct TopArgs {
    /// Sort by: cpu, mem, procs, io, faults, name.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "mem", "procs", "io", "faults", "name"])]
    pub sort: String,
    /// Refresh interval in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Stop after this many refreshes (default: until Ctrl-C).
    #[arg(long)]
    pub iterations: Option<u64>,
}

#[derive(Args, Debug)]
pub struct TenantsArg {
    /// Tenant names (Unix user names).
    #[arg(required = true)]
    pub tenants: Vec<String>,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// Tenant names.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub tenants: Vec<String>,
    /// Every sandbox in the state dir, including half-created and dead ones.
    #[arg(long)]
    pub all: bool,
}

#[derive(Args, Debug, PartialEq)]
pub struct RunArgs {
    /// Tenant name.
    pub tenant: String,
    /// Working directory inside the sandbox (default: the profile's workdir).
    #[arg(long)]
    pub cwd: Option<String>,
    /// Set an environment variable (repeatable), on top of the profile's.
    #[arg(long = "env", short = 'e', value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Pass the caller's file descriptors 3..3+N to the command (all others are closed).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub preserve_fds: u16,
    /// Start the command as a service of the tenant init and return at once
    /// (it keeps running after this command exits, until `corral down`).
    #[arg(long)]
    pub detach: bool,
    /// With --detach: append the service's stdout and stderr to FILE (host path).
    #[arg(long, requires = "detach", value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// A template file to validate; without it, the configured template (and the config dir's
    /// access.toml, gateway.toml and network.toml, if present).
    pub file: Option<PathBuf>,
    /// Also expand and validate the effective profile of this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum ProfileCmd {
    /// Print the built-in default template (a commented starting point for profile.toml).
    Default,
    /// Print a tenant's effective profile: template + overrides, variables expanded.
    Show { tenant: String },
    /// Compile a tenant's seccomp filter and describe it, or write the program to a file
    /// (the raw `struct sock_filter` array the kernel takes: for auditing with a BPF
    /// disassembler, or for `bench/c/seccomp.c --bpf` and `bench/c/seccomp-install.c`).
    Seccomp {
        tenant: String,
        /// Write the program here (created or replaced)
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_command_lines_are_recognised_with_global_options_first() {
        let v = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(
            run_command_args(&v(&["run", "t", "--", "x"])),
            Some(v(&["t", "--", "x"]))
        );
        assert_eq!(
            run_command_args(&v(&[
                "--state-dir",
                "/s",
                "--json",
                "--config-dir=/c",
                "run",
                "t",
                "--",
                "run"
            ])),
            Some(v(&[
                "--state-dir",
                "/s",
                "--json",
                "--config-dir=/c",
                "t",
                "--",
                "run"
            ]))
        );
        assert_eq!(
            run_command_args(&v(&["--state-dir", "run", "up", "t"])),
            None,
            "run as the value of --state-dir"
        );
        for other in [
            &["up", "run"][..],
            &["ls"],
            &[],
            &["--help", "run"],
            &["--state-dir"],
        ] {
            assert_eq!(run_command_args(&v(other)), None, "{other:?}");
        }
    }

    /// Whatever the plain parser accepts, clap parses the same way; what it
    /// declines, clap handles (help, errors, unusual forms).
    #[test]
    fn plain_parse_agrees_with_clap() {
        let cases: &[&[&str]] = &[
            &["t1", "--", "/bin/true"],
            &["t1", "--", "sh", "-c", "echo -- hi"],
            &[
                "--state-dir",
                "/s",
                "--config-dir=/c",
                "--cgroup-parent",
                "p",
                "--json",
                "t1",
                "--",
                "id",
            ],
            &[
                "--cwd",
                "/tmp",
                "-e",
                "A=1",
                "--env",
                "B=2",
                "--env=C=3",
                "t1",
                "--",
                "env",
            ],
            &["--preserve-fds", "2", "t1", "--", "cat"],
            &[
                "--preserve-fds=1",
                "--detach",
                "--log",
                "/var/log/x",
                "t1",
                "--",
                "sleep",
                "1",
            ],
            &["t1", "--cwd", "/w", "--", "pwd"],
            // Declined (clap answers): help, errors, unusual forms.
            &["--help"],
            &["-h"],
            &["t1"],
            &["t1", "--"],
            &["--bogus", "t1", "--", "x"],
            &["t1", "t2", "--", "x"],
            &["--cwd", "/a", "--cwd", "/b", "t1", "--", "x"],
            &["--log", "/l", "t1", "--", "x"],
            &["--preserve-fds", "-1", "t1", "--", "x"],
            &["--preserve-fds", "70000", "t1", "--", "x"],
            &["--cwd", "-x", "t1", "--", "x"],
            &["--json=yes", "t1", "--", "x"],
            &["--json", "--json", "t1", "--", "x"],
            &["--cwd"],
            &["--state-dir=", "t1", "--", "x"],
            &["--config-dir", "", "t1", "--", "x"],
            &["--cwd=", "t1", "--", "x"],
        ];
        let mut accepted = 0;
        for (env, state) in [(None, "/run/corral"), (Some("/from-env"), "/from-env")] {
            // This test alone touches these variables in this test binary.
            match env {
                Some(v) => std::env::set_var("CORRAL_STATE_DIR", v),
                None => std::env::remove_var("CORRAL_STATE_DIR"),
            }
            for case in cases {
                let args: Vec<std::ffi::OsString> = case.iter().map(|a| a.into()).collect();
                let plain = RunCli::parse_plain(&args, |v| std::env::var_os(v));
                let clap =
                    Cli::try_parse_from(["corral", "run"].into_iter().chain(case.iter().copied()))
                        .map(|c| match c.command {
                            Command::Run(run) => RunCli {
                                global: c.global,
                                run,
                            },
                            other => panic!("{case:?}: parsed as {other:?}"),
                        });
                if let Some(p) = plain {
                    accepted += 1;
                    let c = clap
                        .unwrap_or_else(|e| panic!("{case:?}: plain parsed, clap refused: {e}"));
                    assert_eq!(p, c, "{case:?}");
                    if !case.contains(&"--state-dir") {
                        assert_eq!(p.global.state_dir, PathBuf::from(state));
                    }
                } else {
                    let declined_valid =
                        clap.is_ok() && !case.contains(&"--help") && !case.contains(&"-h");
                    // Empty values are always left to clap (it refuses an
                    // empty path, and a missing one is no plain form).
                    let empty_value = case.iter().any(|a| a.is_empty() || a.ends_with('='));
                    assert!(
                        !declined_valid || empty_value,
                        "{case:?}: clap accepts it, the plain parser should too"
                    );
                }
            }
        }
        std::env::set_var("CORRAL_STATE_DIR", "");
        assert!(
            RunCli::parse_plain(&["t1".into(), "--".into(), "x".into()], |v| {
                std::env::var_os(v)
            })
            .is_none(),
            "an empty variable is left to clap"
        );
        std::env::remove_var("CORRAL_STATE_DIR");
        assert_eq!(
            accepted, 14,
            "the 7 plain forms, with and without the variable"
        );
    }
}
